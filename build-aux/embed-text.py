#!/usr/bin/env python3
# Turn a text file into a C string constant: embed-text.py INPUT OUTPUT SYMBOL
import sys

src, dst, symbol = sys.argv[1:4]
with open(src, encoding="utf-8") as f:
    text = f.read()
with open(dst, "w", encoding="utf-8") as f:
    f.write("/* generated from %s */\n" % src.rsplit("/", 1)[-1])
    f.write("const char %s[] =\n" % symbol)
    for line in text.splitlines(True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        f.write('        "%s"\n' % esc)
    f.write("        ;\n")
