"""The tests whose string literals spell a site's message out."""

import os
import re
import bisect
from collections import defaultdict

from error_sites_lib.settings import GAP, GENERIC, GRAM, MIN_MATCH, ROOT, TEST_DIR
from error_sites_lib.lexing import BRACKET, Source, read


# ---- tests ---------------------------------------------------------------------------------------------------

TEST_RE = re.compile(r"\b(TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P)\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")


def collect_test_literals():
    """Test literals -> the tests they are in: a key is a tuple of fragments, one string literal, or the
    literals of a brace list of literals alone ({"SGD", "'lr'", ">= 0"}: the parts expect_error looks for).
    A test is Suite.Name; a literal outside any test is `file (helpers)`."""
    by_value = defaultdict(set)
    base = os.path.join(ROOT, TEST_DIR)
    paths = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        paths += [os.path.join(dirpath, f) for f in filenames if f.endswith((".cpp", ".c"))]
    for path in sorted(paths):
        rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
        src = Source(rel, read(rel))
        close, _, _ = src.brace_pairs()
        tests = []
        for m in TEST_RE.finditer(src.mask):
            o = m.end() - 1
            tests.append((o, close.get(o, len(src.mask)), m.group(2) + "." + m.group(3)))
        starts = [t[0] for t in tests]
        # adjacent literals are one
        merged = []
        for lit in src.lits:
            if lit[3]:
                continue
            if merged and not src.mask[merged[-1][1]:lit[0]].strip():
                merged[-1] = (merged[-1][0], lit[1], merged[-1][2] + lit[2])
            else:
                merged.append(lit[:3])
        # the innermost bracket around each
        inner, stack, k = [], [], 0
        for m in BRACKET.finditer(src.mask):
            i, c = m.start(), m.group()
            while k < len(merged) and merged[k][0] < i:
                inner.append(stack[-1] if stack else None)
                k += 1
            if c in "([{":
                stack.append(i)
            elif stack:
                stack.pop()
        inner += [None] * (len(merged) - len(inner))
        groups = defaultdict(list)
        for lit, o in zip(merged, inner):
            groups[o if o is not None and src.mask[o] == "{" else ("alone", lit[0])].append(lit)
        keys = []
        for o, lits in groups.items():
            if isinstance(o, int) and len(lits) > 1:
                rest, pos = [], o + 1
                for lit in lits:
                    rest.append(src.mask[pos:lit[0]])
                    pos = lit[1]
                rest.append(src.mask[pos:close.get(o, pos)])
                if not re.sub(r"[\s,]", "", "".join(rest)):
                    if sum(len(lit[2]) for lit in lits) >= MIN_MATCH:
                        keys.append((lits[0][0], tuple(lit[2] for lit in lits)))
                    continue
            for lit in lits:
                if len(lit[2]) >= MIN_MATCH and is_words(lit[2]):
                    keys.append((lit[0], (lit[2],)))
        for start, key in keys:
            i = bisect.bisect_right(starts, start) - 1
            if i >= 0 and tests[i][0] < start < tests[i][1]:
                by_value[key].add(tests[i][2])
            else:
                by_value[key].add(os.path.basename(rel) + (" (helpers)" if rel.endswith(".cpp") else ""))
    return by_value


def align(lit, pieces, lead=True, trail=True):
    """The best reading of `lit` as a substring of a message of pieces `pieces` (in order, a value of at most
    GAP characters between each, or before or after): (literal characters matched, longest whole piece in
    it, the literal texts matched), or None when it cannot be one. `lead`/`trail`: the message starts/ends
    with a value (else nothing of `lit` may come before its first piece or after its last)."""
    n = len(lit)
    best = None
    for i, p in enumerate(pieces):
        if n <= len(p) and lit in p:
            return (n, n, (lit,))
        starts = []
        k = min(len(p), n) - 1  # lit begins inside p: its longest start that p ends with
        last = p[-1]
        while k > 0:
            k = lit.rfind(last, 0, k) + 1
            if k > 0 and p.endswith(lit[:k]):
                starts.append((k, 0, [lit[:k]]))
                break
            k -= 1
        w = lit.find(p, 0, GAP + len(p))  # lit begins in the value before p
        if w >= 0 and (w == 0 or i > 0 or lead):
            starts.append((w + len(p), len(p), [p]))
        for pos, whole, texts in starts:
            j = i + 1
            while j < len(pieces):
                q = pieces[j]
                f = lit.find(q, pos, pos + GAP + len(q))
                if f >= 0:
                    pos = f + len(q)
                    texts.append(q)
                    whole = max(whole, len(q))
                    j += 1
                    continue
                k = min(len(q), n - pos)  # lit ends inside q: the longest start of q that lit ends with
                while k > 0:
                    k = q.rfind(lit[-1], 0, k) + 1
                    if k > 0 and lit.endswith(q[:k]) and n - k - pos <= GAP:
                        texts.append(q[:k])
                        pos = n
                        break
                    k -= 1
                break
            score = sum(len(t) for t in texts)
            if j == len(pieces) and pos < n and not trail:
                continue  # text after the message's end
            if n - pos <= GAP and (best is None or (score, whole) > best[:2]):
                best = (score, whole, tuple(texts))
    return best


def is_words(lit):
    """Words of a message rather than a name, a flag, a path or a setting (DTR_DEVICE=cpu)."""
    return " " in lit.strip()


def single_score(lit, pieces, lead, trail):
    r = align(lit, pieces, lead, trail)
    if r and r[0] >= MIN_MATCH and (2 * r[0] >= len(lit) or r[1] >= 20):
        return r[0]
    return 0


def match_score(key, pieces, lead, trail, generic):
    """How much of a message of the site the test literal(s) `key` spell out; 0 when too little.

    One literal: at least MIN_MATCH characters of the site's text, and at least half the literal unless a
    whole piece of 20 or more characters is in it. A list of parts: one part that passes alone; or every part
    could be in the message (a part may be a value alone) and at least two different texts of the site, of
    MIN_MATCH characters together, are in them, not counting texts `generic` says many messages hold ("op '")."""
    has_value = len(pieces) > 1 or lead or trail
    if len(key) == 1:
        return single_score(key[0], pieces, lead, trail)
    alone = max(single_score(part, pieces, lead, trail) if is_words(part) else 0 for part in key)
    if not any(is_words(part) for part in key):
        return 0  # names, settings or values to try, not the words of a message
    texts = set()
    for part in key:
        r = align(part, pieces, lead, trail)
        if r is None:
            if not (has_value and len(part) <= GAP):
                return alone
            continue
        texts.update(t for t in r[2] if len(t.strip()) >= 2)
    total = sum(len(t) for t in texts if not generic(t))
    if len(texts) >= 2 and total >= MIN_MATCH:
        return max(total, alone)
    return alone


def attach_tests(sites_by_file, by_value):
    site_list = [s for sites in sites_by_file.values() for s in sites]
    index = defaultdict(set)
    for idx, site in enumerate(site_list):
        for seg in site.segs:
            if seg[0] == "lit":
                for k in range(len(seg[1]) - GRAM + 1):
                    index[seg[1][k:k + GRAM]].add(idx)
    site_text = ["\0".join(seg[1] for seg in site.segs if seg[0] == "lit") for site in site_list]
    df = {}

    def generic(text):  # a text more than GENERIC sites' messages hold
        if text not in df:
            df[text] = sum(text in t for t in site_text) > GENERIC
        return df[text]

    found = defaultdict(dict)  # site index -> test -> (score, key)
    for key in sorted(by_value):
        candidates = set()
        for part in key:
            for k in range(len(part) - GRAM + 1):
                candidates |= index.get(part[k:k + GRAM], set())
        for idx in sorted(candidates):
            site = site_list[idx]
            pieces = [seg[1] for seg in site.segs if seg[0] == "lit"]
            score = match_score(key, pieces, site.segs[0][0] != "lit", site.segs[-1][0] != "lit", generic)
            if score:
                for t in by_value[key]:
                    if score > found[idx].get(t, (0, ""))[0]:
                        found[idx][t] = (score, key)
    for idx, site in enumerate(site_list):
        tests = found.get(idx, {})
        # real tests before helper files; the best match first
        site.tests = sorted(tests, key=lambda t: ("." in t.split(" ")[0][-4:], -tests[t][0], t))
        site.evidence = {t: tests[t][1] for t in site.tests}
