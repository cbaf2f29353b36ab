"""The function a throw site is in and the condition that triggers it."""

import re

from error_sites_lib.settings import KEYWORDS, TRIGGER_CHARS
from error_sites_lib.messages import call_args, code_span, one_line, shorten


# ---- function names and triggers ----------------------------------------------------------------------------

NAME_BEFORE = re.compile(r"((?:~?[A-Za-z_]\w*\s*(?:<[^<>;{}()]*>)?\s*::\s*)*(?:operator\s*[^\s(]+|~?[A-Za-z_]\w*))\s*$")
CLASS_HEAD = re.compile(r"\b(class|struct|union)\s+(?:\[\[[^\]]*\]\]\s*)?([A-Za-z_]\w*)")


def head_of(src, open_pos):
    """The text (mask) before a '{' back to the previous statement; None when the brace is inside parentheses."""
    mask = src.mask
    depth = 0
    i = open_pos - 1
    while i >= 0:
        c = mask[i]
        if c in ")]":
            depth += 1
        elif c in "([":
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and c in ";{}":
            break
        i -= 1
    return mask[i + 1:open_pos]


def classify_head(head):
    """('function', name) | ('class', name) | ('if', cond-span-in-head) | ('else',) | ('catch', text) | (other,)."""
    if head is None:
        return ("expr",)
    h = re.sub(r"^\s*(?:(?:public|private|protected)\s*:|case\b[^:]*:|default\s*:)\s*", "", head)
    h = re.sub(r"template\s*<[^{};]*?>\s*(?=[A-Za-z_\[])", "", h, count=1)
    h = re.sub(r"\b(?:decltype|alignas)\s*\([^()]*\)", "", h)  # decltype(auto) f(...)
    stripped = h.strip()
    if not stripped:
        return ("block",)
    if re.fullmatch(r"else", stripped):
        return ("else",)
    m = CLASS_HEAD.search(stripped)
    if m and "(" not in stripped[:m.start()] and "=" not in stripped:
        return ("class", m.group(2))
    # first top-level '('
    depth, first = 0, None
    for i, c in enumerate(stripped):
        if c == "(" and depth == 0:
            first = i
            break
        if c in "[{<":
            depth += 1 if c != "<" else 0
        elif c in "]}":
            depth -= 1
    if first is None:
        return ("block",)
    before = stripped[:first]
    if before.rstrip().endswith("]") or before.rstrip().endswith("=") or "=" in re.sub(r"operator\s*\S+", "", before):
        return ("lambda",)
    nm = NAME_BEFORE.search(before)
    if not nm:
        return ("block",)
    name = re.sub(r"\s+", "", nm.group(1))
    last = name.split("::")[-1]
    if last in ("if",) or re.search(r"\belse\s+if\s*$", before):
        return ("if",)
    if last == "catch":
        return ("catch", one_line(stripped[first:]).strip("() "))
    if last in KEYWORDS:
        return ("block",)
    return ("function", name)


def enclosing_function(src, pos):
    o = src.innermost_brace(pos)
    parent = src.brace_pairs()[1]
    name = None
    while o is not None:
        kind = classify_head(head_of(src, o))
        if name is None and kind[0] == "function":
            name = kind[1]
        elif name is not None:
            if kind[0] == "class" and "::" not in name:
                name = kind[1] + "::" + name
            break
        o = parent[o]
    return name


def condition_before(src, pos):
    """The `if` condition (or else / catch) that guards the statement at pos, if it is near."""
    mask = src.mask
    i = pos - 1
    while i >= 0 and mask[i].isspace():
        i -= 1
    if i >= 0 and mask[i] == "{":  # the first statement of a block: the block's guard
        kind = classify_head(head_of(src, i))
        return guard_text(src, i, kind)
    if i >= 0 and mask[i] == ")":
        depth, j = 0, i
        while j >= 0:
            if mask[j] == ")":
                depth += 1
            elif mask[j] == "(":
                depth -= 1
                if depth == 0:
                    break
            j -= 1
        word = re.search(r"([A-Za-z_]\w*)\s*$", mask[:j])
        if word and word.group(1) == "if":
            return "if " + code_span(shorten(one_line(src.code[j + 1:i]), TRIGGER_CHARS))
        return None
    word = re.search(r"([A-Za-z_]\w*)\s*$", mask[:i + 1])
    if word and word.group(1) == "else":
        return "otherwise (else)"
    if i >= 0 and mask[i] == ":":
        m = re.search(r"\b(case\s+[^:;{}]+|default)\s*:$", src.code[:i + 1])
        if m:
            return code_span(one_line(m.group(1)))
    o = src.innermost_brace(pos)
    if o is not None:
        return guard_text(src, o, classify_head(head_of(src, o)))
    return None


def guard_text(src, open_pos, kind):
    if kind[0] == "if":
        head_start = open_pos - len(head_of(src, open_pos))
        head = src.code[head_start:open_pos]
        m = re.search(r"\bif\s*(?:constexpr\s*)?\(", head)
        if m:
            a = head_start + m.end() - 1
            _, close = call_args(src.mask, a)
            return "if " + code_span(shorten(one_line(src.code[a + 1:close]), TRIGGER_CHARS))
    if kind[0] == "else":
        return "otherwise (else)"
    if kind[0] == "catch":
        return "catching " + code_span(shorten(kind[1], TRIGGER_CHARS))
    return None
