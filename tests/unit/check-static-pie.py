#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The static agent is a static PIE: an ELF of type ET_DYN (position-independent, loaded at
a random address) with no PT_INTERP (no dynamic loader: it runs in any root filesystem) and
no DT_NEEDED library. Exits non-zero, saying what is wrong, otherwise."""

import struct
import sys

ET_DYN, PT_INTERP, PT_DYNAMIC, DT_NEEDED = 3, 3, 2, 1

with open(sys.argv[1], 'rb') as f:
    elf = f.read()
if elf[:4] != b'\x7fELF' or elf[4] != 2:
    sys.exit(f'{sys.argv[1]}: not a 64-bit ELF file')
end = '<' if elf[5] == 1 else '>'
e_type, = struct.unpack_from(end + 'H', elf, 16)
e_phoff, = struct.unpack_from(end + 'Q', elf, 32)
e_phentsize, e_phnum = struct.unpack_from(end + 'HH', elf, 54)
problems = []
if e_type != ET_DYN:
    problems.append(f'ELF type {e_type}, not ET_DYN: not position-independent')
for i in range(e_phnum):
    p_type, _flags, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from(end + 'IIQQQQ', elf,
                                                                            e_phoff + i * e_phentsize)
    if p_type == PT_INTERP:
        problems.append('has a PT_INTERP: needs a dynamic loader')
    if p_type == PT_DYNAMIC:
        for off in range(p_offset, p_offset + p_filesz, 16):
            tag, _val = struct.unpack_from(end + 'qQ', elf, off)
            if tag == DT_NEEDED:
                problems.append('needs a shared library (DT_NEEDED)')
                break
if problems:
    sys.exit(f'{sys.argv[1]}: ' + '; '.join(problems))
print(f'{sys.argv[1]}: a static PIE')
