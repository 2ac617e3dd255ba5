"""The links of a topology file (ibnetdiscover / ibsim net), seen from their switch end.

    python3 tools/lib/switch-links.py FABRIC.net KIND [MATCH]

prints one `"switch description"[port]` per line: KIND `sw` lists switch-to-switch links
(each from both ends), `ca` switch-to-host links; MATCH, a regular expression, keeps the
switches whose description it matches. The tools draw their random links from this.
"""
import re
import sys


def links(net, kind, match=""):
    out, cur, switch = [], None, False
    for line in open(net):
        m = re.match(r'(Switch|Ca)\s+\d+\s+"[^"]+"\s*#\s*"([^"]+)"', line)
        if m:
            switch, cur = m.group(1) == "Switch", m.group(2)
            continue
        m = re.match(r'\[(\d+)\][^"]*"([SH])-[0-9a-fA-F]+"\[\d+\]', line)
        if not (m and switch) or (match and not re.search(match, cur)):
            continue
        if (m.group(2) == "S") == (kind == "sw"):
            out.append((cur, int(m.group(1))))
    return out


if __name__ == "__main__":
    for name, port in links(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""):
        print(f'"{name}"[{port}]')
