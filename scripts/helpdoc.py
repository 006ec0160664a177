#!/usr/bin/env python3
"""helpdoc.py — memtrail's man pages and bash completion, made at build time
from the --help of the memtrail just built, so that neither can drift from
what the commands accept (each command's help is printed from its option
table: src/cli/parse_options.c).

  helpdoc.py man MEMTRAIL DOCDIR OUTDIR
      OUTDIR/memtrail-CMD.1.scd for every command `memtrail --help` lists
      (subcommands such as `refset record` as sections of their parent's
      page), and OUTDIR/memtrail.1.scd from DOCDIR/memtrail.1.scd with its
      @COMMANDS@ line replaced by the command list. scdoc turns them into
      pages (the Makefile's `man` target).
  helpdoc.py completion MEMTRAIL OUTFILE
      the bash completion script: commands, each command's options, the
      values of options that name them (--sort live|peak|allocs), files,
      and the pids of tracked processes (their control sockets) where a
      command takes a PID.

The help layout read here: "usage:" lines, free text, then "Commands:",
"Options:" and "Environment:" sections of two-space-indented items (the
description from column 24, or on the next lines), each ending at a blank
line."""
import re
import subprocess
import sys

SECTIONS = ("Commands:", "Options:", "Environment:")


def help_of(memtrail, words):
    return subprocess.run([memtrail, *words, "--help"], stdout=subprocess.PIPE, text=True,
                          check=True).stdout


class Help:
    def __init__(self, text):
        lines = text.rstrip("\n").split("\n")
        i = 0
        self.usage = []
        while i < len(lines) and lines[i].strip():
            self.usage.append(lines[i])
            i += 1
        self.blocks = []  # (title or None, lines)
        title, body = None, []
        for line in lines[i:]:
            if line in SECTIONS:
                self.blocks.append((title, body))
                title, body = line[:-1], []
            elif title is not None and not line.strip():
                self.blocks.append((title, body))
                title, body = None, []
            else:
                body.append(line)
        self.blocks.append((title, body))

    def section(self, title):
        for t, body in self.blocks:
            if t == title:
                return items(body, title == "Commands")
        return []

    def options(self):
        """[(flags, arg or None, text)], flags like ['-o', '--output']."""
        out = []
        for term, text in self.section("Options"):
            words = term.split(" ")
            flags = [w.rstrip(",") for w in words if w.startswith("-")]
            rest = [w for w in words if not w.startswith("-")]
            out.append((flags, " ".join(rest) or None, text))
        return out


def items(body, one_word=False):
    """The "  TERM   description" items of a section, continuation lines
    joined; a TERM of one_word ends at the first space (a command's name)."""
    out = []
    for line in body:
        if line.startswith("  ") and not line.startswith("   "):
            m = re.match(r"^  (\S+)(?:\s+(.*))?$" if one_word else r"^  (\S+(?: \S+)*)(?:\s{2,}(.*))?$", line)
            out.append([m.group(1), (m.group(2) or "").strip()])
        elif out and line.strip():
            out[-1][1] = (out[-1][1] + " " + line.strip()).strip()
    return out


def commands(memtrail):
    """[(name, summary)] from memtrail --help."""
    return [tuple(i) for i in Help(help_of(memtrail, [])).section("Commands")]


def subcommands(memtrail, cmd, helptext):
    """The names of cmd's own subcommands (refset record, xe plan)."""
    return [name for name, _ in helptext.section("Commands")]


# --- man pages (scdoc) ------------------------------------------------------------

def esc(s):
    s = s.replace("\\", "\\\\").replace("*", "\\*").replace("_", "\\_")
    return "\\" + s if s[:1] in ("-", "#", ".") else s


def synopsis(help_):
    lines = [re.sub(r"^(usage: |       )", "", u) for u in help_.usage]
    return ["```"] + lines + ["```", ""]


def free_text(body):
    """Paragraphs (one scdoc line each) and indented runs as literal blocks."""
    out, para, lit = [], [], []

    def flush():
        if para:
            out.extend([esc(" ".join(para)), ""])
            para.clear()
        if lit:
            out.extend(["```"] + lit + ["```", ""])
            lit.clear()

    for line in body:
        if not line.strip():
            flush()
        elif line.startswith(" "):
            if para:
                flush()
            lit.append(line)
        else:
            if lit:
                flush()
            para.append(line.strip())
    flush()
    return out


def option_term(flags, arg):
    t = ", ".join("*%s*" % esc(f) for f in flags)
    return t + (" _%s_" % esc(arg) if arg else "")


def body_of(help_, level):
    """DESCRIPTION text, subcommands, options, environment and notes of one help."""
    head = "#" * level
    out, seen_options = [], False
    for title, body in help_.blocks:
        if title is None:
            text = free_text(body)
            if text and seen_options and level == 1:
                out += ["# NOTES", ""]
            out += text
        elif title == "Commands":
            out += ["%s COMMANDS" % head if level == 1 else "*Commands:*", ""]
            for name, text in items(body, True):
                out += ["*%s*" % esc(name), "\t" + esc(text), ""]
        elif title == "Options":
            seen_options = True
            out += ["%s OPTIONS" % head if level == 1 else "*Options:*", ""]
            for flags, arg, text in help_.options():
                out += [option_term(flags, arg), "\t" + esc(text), ""]
        else:
            out += ["%s %s" % (head, title.upper()) if level == 1 else "*%s:*" % title, ""]
            out += ["```"] + body + ["```", ""]
    return out


def man_page(memtrail, name, summary):
    h = Help(help_of(memtrail, [name]))
    page = ["memtrail-%s(1)" % name, "", "# NAME", "", "memtrail %s - %s" % (name, esc(summary)), "",
            "# SYNOPSIS", ""] + synopsis(h) + ["# DESCRIPTION", ""] + body_of(h, 1)
    for sub in subcommands(memtrail, name, h):
        s = Help(help_of(memtrail, [name, sub]))
        page += ["# MEMTRAIL %s %s" % (name.upper(), sub.upper()), ""] + synopsis(s) + body_of(s, 2)
    page += ["# SEE ALSO", "", "*memtrail*(1); docs/cli.md in memtrail's sources", ""]
    return "\n".join(page)


def write_man(memtrail, docdir, outdir):
    cmds = commands(memtrail)
    for name, summary in cmds:
        with open("%s/memtrail-%s.1.scd" % (outdir, name), "w") as f:
            f.write(man_page(memtrail, name, summary))
    listing = []
    for name, summary in cmds:
        listing += ["*%s*" % name, "\t%s (*memtrail-%s*(1))" % (esc(summary), name), ""]
    with open("%s/memtrail.1.scd" % docdir) as f:
        top = f.read()
    with open("%s/memtrail.1.scd" % outdir, "w") as f:
        f.write(top.replace("@COMMANDS@\n", "\n".join(listing)))


# --- bash completion ------------------------------------------------------------------

def usage_lines(help_, words):
    """The usage lines of `memtrail WORDS` (continuation lines joined), as
    tokens after those words: a bracketed group is one token."""
    lines = []
    for line in help_.usage:
        text = re.sub(r"^usage: ", "", line).strip()
        if text.startswith("memtrail "):
            lines.append(text)
        elif lines:
            lines[-1] += " " + text
    out = []
    for text in lines:
        toks = re.findall(r"\[[^\]]*\]|\S+", text)
        if toks[:1 + len(words)] == ["memtrail", *words]:
            out.append(toks[1 + len(words):])
    return out


def is_metavar(tok):
    return re.match(r"^[A-Z]", tok) is not None


def slots_and_args(help_, words):
    """The positional slots of a command's usage lines, each a set of kinds
    (@pid, @file, @command) and literal words; and the value names its
    usage gives options (--mode summary|detail|trace)."""
    slots, args = [], {}
    for toks in usage_lines(help_, words):
        line = []  # (kinds, optional)
        i = 0
        while i < len(toks):
            t = toks[i]
            i += 1
            inner = t[1:-1] if t.startswith("[") else t
            if inner.startswith("-"):
                parts = inner.split(" ", 1)
                if len(parts) == 2:
                    args.setdefault(parts[0], parts[1])
                elif not t.startswith("[") and i < len(toks) and is_metavar(toks[i]):
                    args.setdefault(inner, toks[i])
                    i += 1
                continue
            if inner in ("OPTIONS", "...") or inner.startswith("ARGS"):
                continue
            kinds = set()
            for alt in inner.rstrip(".").split("|"):
                kinds.add("@pid" if alt == "PID" else "@command" if alt == "CMD" else
                          "@file" if is_metavar(alt) else alt)
            line.append((kinds, t.startswith("[")))
        for n, (kinds, optional) in enumerate(line):
            while len(slots) <= n:
                slots.append(set())
            slots[n] |= kinds
            if optional and n + 1 < len(line):  # left out: the next word stands here
                slots[n] |= line[n + 1][0]
    return slots, args


def value_kinds(arg):
    """What completes an option's value: "value" and its kinds or words."""
    if "PID" in arg:
        return "value @pid"
    if re.fullmatch(r"[A-Za-z_]+(\|[A-Za-z_]+)+", arg):
        return "value " + " ".join(arg.split("|"))
    if arg in ("FILE", "OUT", "DIR", "PATH", "TRACE"):
        return "value @file"
    return "value"


def sh_words(ws):
    return "'" + " ".join(sorted(ws)) + "'"


def write_completion(memtrail, outfile):
    cmds = [name for name, _ in commands(memtrail)]
    entries = []  # (key, options, values {opt: kinds}, slots)
    nested = {}
    for name in cmds:
        h = Help(help_of(memtrail, [name]))
        subs = subcommands(memtrail, name, h)
        if subs:
            nested[name] = subs
        for words, hh in [([name], h)] + [([name, s], Help(help_of(memtrail, [name, s]))) for s in subs]:
            slots, uargs = slots_and_args(hh, words)
            opts, values = [], {}
            for flags, arg, _ in hh.options():
                opts += flags
                long_ = [f for f in flags if f.startswith("--")]
                kinds = "flag" if arg is None else value_kinds(uargs.get(long_[0], arg) if long_ else arg)
                for f in flags:
                    values[f] = kinds
            entries.append((" ".join(words), opts, values, [] if subs and len(words) == 1 else slots))

    out = ["# bash completion for memtrail; generated by scripts/helpdoc.py from memtrail's --help.",
           "# Installed as share/bash-completion/completions/memtrail.", "",
           "# The pids of our tracked processes: their control sockets, where the agent puts them.",
           "_memtrail_pids() {",
           "    local d s p uid",
           "    uid=$(id -u)",
           "    for d in ${XDG_RUNTIME_DIR:+\"$XDG_RUNTIME_DIR/memtrail\"} \"/run/user/$uid/memtrail\" \"/tmp/memtrail-$uid\"; do",
           "        for s in \"$d\"/*.sock; do",
           "            [ -S \"$s\" ] || continue",
           "            p=${s##*/}; p=${p%.sock}",
           "            [ -d \"/proc/$p\" ] && echo \"$p\"",
           "        done",
           "    done | sort -un",
           "}", "",
           "# _memtrail_info KEY WHAT: a command's (KEY's) subcommands or options, what",
           "# an option takes (valueOPT: \"flag\", or \"value\" and what completes it), or",
           "# what completes its Nth positional word (slotN).",
           "_memtrail_info() {",
           "    case \"$1/$2\" in",
           "    /commands) echo %s ;;" % sh_words(cmds + ["help"]),
           "    /options) echo '--version --help -h' ;;"]
    for name, subs in nested.items():
        out.append("    '%s/commands') echo %s ;;" % (name, sh_words(subs)))
    for key, opts, values, slots in entries:
        out.append("    '%s/options') echo %s ;;" % (key, sh_words(set(opts))))
        for opt in sorted(opts):
            out.append("    '%s/value%s') echo '%s' ;;" % (key, opt, values[opt]))
        for i, s in enumerate(slots):
            out.append("    '%s/slot%d') echo %s ;;" % (key, i, sh_words(s)))
    out += ["    esac", "}", "",
            "# COMPREPLY from a list of words and kinds (@file, @pid, @command).",
            "_memtrail_reply() {",
            "    local cur=$1 w words=()",
            "    shift",
            "    for w in $*; do",
            "        case $w in",
            "        @file) compopt -o filenames 2>/dev/null; mapfile -t -O \"${#COMPREPLY[@]}\" COMPREPLY < <(compgen -f -- \"$cur\") ;;",
            "        @pid) words+=($(_memtrail_pids)) ;;",
            "        @command) mapfile -t -O \"${#COMPREPLY[@]}\" COMPREPLY < <(compgen -c -- \"$cur\") ;;",
            "        *) words+=(\"$w\") ;;",
            "        esac",
            "    done",
            "    [ ${#words[@]} -gt 0 ] && mapfile -t -O \"${#COMPREPLY[@]}\" COMPREPLY < <(compgen -W \"${words[*]}\" -- \"$cur\")",
            "    return 0",
            "}", "",
            "_memtrail() {",
            "    local cur=${COMP_WORDS[COMP_CWORD]} key='' nested='' npos=0 i w v dashdash=0",
            "    COMPREPLY=()",
            "    # the command (and subcommand) and the positional words before the cursor",
            "    for ((i = 1; i < COMP_CWORD; i++)); do",
            "        w=${COMP_WORDS[i]}",
            "        if [ $dashdash = 0 ] && [ \"$w\" = -- ]; then dashdash=1; continue; fi",
            "        if [ $dashdash = 0 ] && [[ $w == -?* ]]; then",
            "            v=$(_memtrail_info \"$key\" \"value$w\")",
            "            [[ $v == value* ]] && ((i++))",
            "            continue",
            "        fi",
            "        if [ -z \"$key\" ]; then",
            "            key=$w",
            "            [ -n \"$(_memtrail_info \"$w\" commands)\" ] && nested=1",
            "            continue",
            "        fi",
            "        if [ -n \"$nested\" ]; then key=\"$key $w\"; nested=''; continue; fi",
            "        [ \"$key\" = help ] && return 0",
            "        # run, refset record: the program's own words follow it",
            "        if [[ $(_memtrail_info \"$key\" slot$npos) == *@command* ]]; then",
            "            compopt -o default 2>/dev/null",
            "            return 0",
            "        fi",
            "        ((npos++))",
            "    done",
            "    local prev=${COMP_WORDS[COMP_CWORD-1]}",
            "    if [ $COMP_CWORD -gt 1 ] && [ $dashdash = 0 ] && [[ $prev == -?* ]]; then",
            "        v=$(_memtrail_info \"$key\" \"value$prev\")",
            "        if [[ $v == value* ]]; then",
            "            _memtrail_reply \"$cur\" ${v#value}",
            "            return 0",
            "        fi",
            "    fi",
            "    if [[ $cur == -* ]] && [ $dashdash = 0 ]; then",
            "        _memtrail_reply \"$cur\" $(_memtrail_info \"$key\" options)",
            "    elif [ -z \"$key\" ] || [ \"$key\" = help ]; then",
            "        _memtrail_reply \"$cur\" $(_memtrail_info '' commands)",
            "    elif [ -n \"$nested\" ]; then",
            "        _memtrail_reply \"$cur\" $(_memtrail_info \"$key\" commands)",
            "    else",
            "        local kinds",
            "        kinds=$(_memtrail_info \"$key\" slot$npos)",
            "        # past the last slot: a last slot of files repeats (FILE...)",
            "        if [ -z \"$kinds\" ] && [ $npos -gt 0 ]; then",
            "            kinds=$(_memtrail_info \"$key\" slot$((npos - 1)))",
            "            [[ $kinds == *@file* ]] && kinds=@file || kinds=''",
            "        fi",
            "        _memtrail_reply \"$cur\" $kinds",
            "    fi",
            "    return 0",
            "}",
            "complete -F _memtrail memtrail", ""]
    with open(outfile, "w") as f:
        f.write("\n".join(out))


def main(argv):
    if len(argv) == 5 and argv[1] == "man":
        write_man(argv[2], argv[3], argv[4])
    elif len(argv) == 4 and argv[1] == "completion":
        write_completion(argv[2], argv[3])
    else:
        sys.stderr.write("usage: helpdoc.py man MEMTRAIL DOCDIR OUTDIR | completion MEMTRAIL OUTFILE\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
