"""The parts of scripts/error_sites.py (docs/error-sites.md): lexing, messages, triggers, sites, matching."""
