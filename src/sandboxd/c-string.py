#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""c-string.py INPUT OUTPUT NAME: writes OUTPUT, a C header defining
`static const char NAME[]` as the text of INPUT, so that the daemon serves the very file
that is installed (the varlink interface description)."""

import sys


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, dest, name = argv
    with open(src, encoding='utf-8') as f:
        text = f.read()
    lines = [f'/* Generated from {src.rsplit("/", 1)[-1]} by c-string.py: do not edit. */',
             '#pragma once', '', f'static const char {name}[] =']
    chunks = text.splitlines(keepends=True) or ['']
    for chunk in chunks:
        escaped = ''.join('\\n' if c == '\n' else
                          c if c.isascii() and c.isprintable() and c not in '"\\?' else
                          ''.join(f'\\{b:03o}' for b in c.encode('utf-8')) for c in chunk)
        lines.append(f'        "{escaped}"')
    lines[-1] += ';'
    with open(dest, 'w', encoding='ascii') as f:
        f.write('\n'.join(lines) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
