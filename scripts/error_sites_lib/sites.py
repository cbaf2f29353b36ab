"""Every throw site of the library's sources: macros, throw expressions, [[noreturn]] helpers and functions returning
an error."""

import os
import re
from collections import defaultdict

from error_sites_lib.settings import (
    DEVICE_MACROS, DTR_TYPES, OTHER_TYPES, ROOT, SKIP_DIRS, SOURCE_DIRS, SOURCE_EXTS, TRIGGER_CHARS)
from error_sites_lib.lexing import Source, read
from error_sites_lib.messages import (
    CONSTANTS, Renderer, call_args, code_span, normalize, one_line, only_literals, shorten)
from error_sites_lib.triggers import classify_head, condition_before, enclosing_function, head_of


# ---- sites ---------------------------------------------------------------------------------------------------

class Site:
    def __init__(self, path, pos, kind, etype, segs, trigger, function, count=1, note=None):
        self.path = path
        self.pos = pos
        self.kind = kind
        self.type = etype
        self.segs = normalize(segs)
        self.trigger = trigger
        self.function = function
        self.count = count
        self.note = note
        self.tests = []


SITE_RE = re.compile(r"\b(DTR_THROW|DTR_CHECK_SHAPES|DTR_CHECK|DTR_CUDA_CHECK_LAUNCH|DTR_CUDA_CHECK|DTR_CUBLAS_CHECK"
                     r"|DTR_CUDNN_CHECK)\s*\(|\bthrow\b")
TYPE_RE = re.compile(r"\s*((?:::)?[A-Za-z_]\w*(?:\s*(?:::|\.|->)\s*[A-Za-z_]\w*)*)\s*([({])")
NORETURN_RE = re.compile(r"\[\[[^\]]*\bnoreturn\b[^\]]*\]\]\s*(?:(?:static|inline|virtual|constexpr)\s+)*void\s+"
                         r"((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*\(")
LAMBDA_RE = re.compile(r"\bauto\s+([A-Za-z_]\w*)\s*=\s*\[[^\]]*\]\s*\(")
RETURNS_ERROR_RE = re.compile(r"\b(?:dtr::)?(" + "|".join(DTR_TYPES) + r")\s+((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*\(")


def clean_type(name):
    name = re.sub(r"\s+", "", name)
    name = re.sub(r"^(::)?dtr::", "", name)
    return name.lstrip(":")


def find_sources():
    files = []
    for top in SOURCE_DIRS:
        base = os.path.join(ROOT, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for f in filenames:
                if f.endswith(SOURCE_EXTS):
                    files.append(os.path.relpath(os.path.join(dirpath, f), ROOT).replace(os.sep, "/"))
    return sorted(files)


class Helper:
    """A [[noreturn]] function (or one returning a dtr error) and the message it throws."""

    def __init__(self, name, src, open_paren, body_open, noreturn):
        self.name = name
        self.src = src
        self.noreturn = noreturn
        spans, _ = call_args(src.mask, open_paren)
        self.params = []
        self.pack = set()
        for a, b in spans:
            decl = src.mask[a:b].split("=")[0]
            m = re.search(r"(\.\.\.)?\s*([A-Za-z_]\w*)\s*(?:\[\s*\])?\s*$", decl)
            if m:
                self.params.append(m.group(2))
                if m.group(1) or "..." in decl:
                    self.pack.add(m.group(2))
        self.body = (body_open, src.brace_pairs()[0].get(body_open, body_open))
        self.scope = None  # where its calls may be: a lambda's, after it in the function that defines it
        self.sites = []  # filled by scan_file
        self.type = None
        self.segs = None


def find_helpers(sources):
    """Functions that throw for their callers: [[noreturn]] ones with a body, and ones that return a dtr error."""
    helpers = defaultdict(list)
    for src in sources:
        for regex, noreturn in ((NORETURN_RE, True), (RETURNS_ERROR_RE, False)):
            for m in regex.finditer(src.mask):
                name = m.group(1) if noreturn else m.group(2)
                open_paren = m.end() - 1
                _, close = call_args(src.mask, open_paren)
                rest = src.mask[close + 1:]
                after = re.match(r"[\w\s:&]*?(?:noexcept\s*(?:\([^)]*\))?)?\s*\{", rest)
                if not after:
                    # a declaration; its definition is found by its own match (without [[noreturn]] there)
                    if noreturn:
                        helpers[name.split("::")[-1]].append(("decl", src, m.start()))
                    continue
                body_open = close + 1 + after.end() - 1
                h = Helper(name, src, open_paren, body_open, noreturn)
                if not noreturn:
                    h.type = m.group(1)
                helpers[name.split("::")[-1]].append(h)
    # lambdas that throw for their callers: auto fail = [&](std::string_view why) { DTR_THROW(..., why); };
    for src in sources:
        for m in LAMBDA_RE.finditer(src.mask):
            _, close = call_args(src.mask, m.end() - 1)
            after = re.match(r"[\w\s:&<>,*]*?(?:->[^{;]*)?\{", src.mask[close + 1:])
            if not after:
                continue
            h = Helper(m.group(1), src, m.end() - 1, close + 1 + after.end() - 1, True)
            o = src.innermost_brace(m.start())
            h.scope = (h.body[1], src.brace_pairs()[0].get(o, len(src.mask))) if o is not None else None
            helpers[m.group(1)].append(h)
    # definitions of [[noreturn]] functions declared elsewhere (void X::name(...) { ... })
    for short, entries in list(helpers.items()):
        if not any(isinstance(e, tuple) for e in entries):
            continue
        if any(isinstance(e, Helper) and e.noreturn for e in entries):
            continue
        pat = re.compile(r"\bvoid\s+((?:[A-Za-z_]\w*::)*" + re.escape(short) + r")\s*\(")
        for src in sources:
            for m in pat.finditer(src.mask):
                _, close = call_args(src.mask, m.end() - 1)
                after = re.match(r"[\w\s:&]*?(?:noexcept\s*(?:\([^)]*\))?)?\s*\{", src.mask[close + 1:])
                if after:
                    helpers[short].append(Helper(m.group(1), src, m.end() - 1, close + 1 + after.end() - 1, True))
    return {k: [e for e in v if isinstance(e, Helper)] for k, v in helpers.items()}


def helper_of(site_pos, src, helpers):
    for hs in helpers.values():
        for h in hs:
            if h.src is src and h.body[0] < site_pos < h.body[1]:
                return h
    return None


def scan_file(src, helpers, returners):
    sites = []
    mask, code = src.mask, src.code
    device = {}
    for m in SITE_RE.finditer(mask):
        pos = m.start()
        macro = m.group(1)
        if macro in DEVICE_MACROS:
            if macro not in device:
                what, message = DEVICE_MACROS[macro]
                device[macro] = Site(src.path, pos, macro, "DeviceError", [("lit", message)],
                                     what, None, count=0)
                device[macro].functions = []
                sites.append(device[macro])
            site = device[macro]
            site.count += 1
            function = enclosing_function(src, pos)
            if function and function not in site.functions:
                site.functions.append(function)
            shown = site.functions[:3]
            site.function = ", ".join(shown) + (" +" + str(len(site.functions) - 3) if len(site.functions) > 3 else "")
            continue
        owner = helper_of(pos, src, helpers)
        rend = Renderer(src, owner.params if owner else ())
        function = enclosing_function(src, pos)
        if macro:
            spans, _ = call_args(mask, m.end() - 1)
            if macro == "DTR_THROW":
                etype = clean_type(code[slice(*spans[0])])
                segs = rend.render_args(spans[1:])
                trigger = condition_before(src, pos)
            elif macro == "DTR_CHECK":
                etype = clean_type(code[slice(*spans[1])])
                segs = rend.render_args(spans[2:])
                trigger = "unless " + code_span(shorten(one_line(code[slice(*spans[0])]), TRIGGER_CHARS))
            else:  # DTR_CHECK_SHAPES
                etype = "ShapeError"
                segs = [("lit", "op '")] + rend.render(*spans[1]) + [("lit", "' ")] + rend.render_args(spans[3:]) \
                    + [("lit", ", got "), ("ph",)]
                trigger = "unless " + code_span(shorten(one_line(code[slice(*spans[0])]), TRIGGER_CHARS))
            site = Site(src.path, pos, macro, etype, segs, trigger, function)
        else:  # throw ...
            rest = mask[m.end():]
            if re.match(r"\s*(?:[A-Za-z_][\w.:>-]*\s*)?;", rest):
                continue  # a rethrow, or `throw e;` of a caught exception
            tm = TYPE_RE.match(rest)
            if not tm:
                site = Site(src.path, pos, "throw", "?", [("ph",)], condition_before(src, pos), function,
                            note="an expression the script does not read: " + code_span(one_line(rest[:60])))
                sites.append(site)
                continue
            name = clean_type(tm.group(1))
            open_pos = m.end() + tm.end() - 1
            spans, _ = call_args(mask, open_pos)
            short = re.split(r"::|\.|->", name)[-1]
            if name in DTR_TYPES or name in OTHER_TYPES:
                if name.startswith("CLI::") and len(spans) >= 2:
                    segs = rend.render(*spans[0]) + [("lit", ": ")] + rend.render(*spans[1])
                else:
                    segs = rend.render(*spans[0]) if spans else []
                site = Site(src.path, pos, "throw", name, segs, condition_before(src, pos), function)
            elif short in returners:
                h = pick_returner(returners[short], src.path)
                site = Site(src.path, pos, "throw", h.type, h.segs or [("ph",)], condition_before(src, pos),
                            function, note="built by " + code_span(h.name + "()"))
            else:
                site = Site(src.path, pos, "throw", "?", [("ph",)], condition_before(src, pos), function,
                            note="throws " + code_span(name + "(…)") + ", a type the script does not know")
        if owner is not None:
            owner.sites.append(site)
        sites.append(site)
    return sites


def resolve_returners(helpers):
    """Helpers that return a dtr error: the message they build (`std::string message = ...` or inline)."""
    returners = {}
    for short, hs in helpers.items():
        for h in hs:
            if h.noreturn:
                continue
            src = h.src
            a, b = h.body
            body = src.mask[a:b]
            rend = Renderer(src)
            segs = None
            cm = re.search(r"\b(?:dtr::)?" + h.type + r"\s*[({]", body)
            if cm:
                spans, _ = call_args(src.mask, a + cm.end() - 1)
                if spans:
                    first = src.mask[slice(*spans[0])].strip()
                    var = re.fullmatch(r"(?:std::move\()?\s*([A-Za-z_]\w*)\s*\)?", first)
                    if var:
                        dm = re.search(r"\b(?:std::string|auto)\s+" + var.group(1) + r"\s*=", body)
                        if dm:
                            s = a + dm.end()
                            e = src.mask.find(";", s)
                            segs = rend.render(s, e) + [("ph",)]
                    else:
                        segs = rend.render(*spans[0])
            h.segs = segs
            returners.setdefault(short, []).append(h)
    return returners


def pick_returner(candidates, path):
    """The helper a `throw name(...)` in `path` calls: one of the same file, else of the same folder."""
    for same in (lambda h: h.src.path == path, lambda h: h.src.path.split("/")[0] == path.split("/")[0]):
        for h in candidates:
            if same(h):
                return h
    return candidates[0]


def expand_helper_calls(sources, helpers, sites_by_file):
    """Calls of a [[noreturn]] helper (or a throwing lambda) whose message takes a literal from its caller
    become sites, in place of the helper's own throw."""
    for short, hs in helpers.items():
        hs = [h for h in hs if h.noreturn and h.sites]
        if not hs:
            continue
        calls = []
        call_re = re.compile(r"(?<![\w:.>~])(?:[A-Za-z_]\w*::)*" + re.escape(short) + r"\s*\(")
        for src in sources:
            for m in call_re.finditer(src.mask):
                before = src.mask[max(0, m.start() - 80):m.start()]
                if re.search(r"\b(?:void|noreturn\]\])\s*(?:[A-Za-z_]\w*::)*$", before):
                    continue  # the definition or a declaration
                spans, _ = call_args(src.mask, m.end() - 1)
                calls.append((src, m.start(), spans))
        for h in hs:
            direct = [seg for site in h.sites for seg in site.segs if seg[0] == "param"]
            if not direct:
                continue
            mine = []
            for src, pos, spans in calls:
                if src is not h.src and (h.src.path.endswith(".cpp") or h.scope):
                    continue
                if h.scope and not h.scope[0] < pos < h.scope[1]:
                    continue
                if h.body[0] < pos < h.body[1]:
                    continue
                if not h.pack and len(spans) != len(h.params):
                    continue
                if len(hs) > 1 and src is h.src:  # overloads by class: the call must be in the helper's class
                    cls = class_of(src, h.body[0])
                    if cls is not None and not (cls[0] < pos < cls[1]):
                        continue
                mine.append((src, pos, spans))
            if not any(any(seg[0] == "lit" for a, b in spans for seg in Renderer(src).render(a, b))
                       for src, pos, spans in mine):
                continue
            for src, pos, spans in mine:
                rend = Renderer(src)
                args = {}
                for idx, p in enumerate(h.params):
                    if p in h.pack:
                        args[p] = rend.render_args(spans[idx:])
                        break
                    if idx < len(spans):
                        args[p] = rend.render(*spans[idx])
                for inner in reversed(h.sites):  # the helper's last throw: the general case
                    segs = []
                    for seg in inner.segs:
                        segs += args.get(seg[1], [("ph",)]) if seg[0] == "param" else [seg]
                    parts = [condition_before(src, pos), "via " + code_span(short + "()")]
                    if inner.trigger and inner.trigger.startswith("unless"):
                        parts.append(inner.trigger)  # a check inside the helper
                    site = Site(src.path, pos, "call", inner.type, segs, ", ".join(p for p in parts if p),
                                enclosing_function(src, pos))
                    sites_by_file[src.path].append(site)
                    break  # one row per call: the helper's last throw (the others differ by location only)
            for inner in h.sites:
                sites_by_file[inner.path].remove(inner)


def class_of(src, pos):
    close, parent, _ = src.brace_pairs()
    o = src.innermost_brace(pos)
    while o is not None:
        if classify_head(head_of(src, o))[0] == "class":
            return (o, close[o])
        o = parent[o]
    return None


CONSTANT_RE = re.compile(r"\b(?:constexpr|const)\b[^;={}()]*?\b([A-Za-z_]\w*)\s*=\s*(?=[uUL8R]*\")")


def find_constants(sources):
    CONSTANTS.clear()
    for src in sources:
        for m in CONSTANT_RE.finditer(src.mask):
            end = src.mask.find(";", m.end())
            lits = src.literals_in(m.end(), end)
            if lits and only_literals(src.code, m.end(), end, lits):
                value = "".join(lit[2] for lit in lits)
                name = m.group(1)
                CONSTANTS[name] = value if CONSTANTS.get(name, value) == value else None  # None: ambiguous


def collect_sites():
    sources = [Source(p, read(p)) for p in find_sources()]
    find_constants(sources)
    helpers = find_helpers(sources)
    returners = resolve_returners(helpers)
    sites_by_file = defaultdict(list)
    for src in sources:
        sites_by_file[src.path] = scan_file(src, helpers, returners)
    expand_helper_calls(sources, helpers, sites_by_file)
    for path in sites_by_file:
        sites_by_file[path].sort(key=lambda s: s.pos)
    return {p: s for p, s in sorted(sites_by_file.items()) if s}
