#!/usr/bin/env python3
"""Every relative link in README.md, docs/ and pod-templates/ leads to a file that
exists, and every #anchor to a heading of that file (GitHub's slugs)."""
import glob
import os
import re
import sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
def slug(h):
    h=h.strip().lower(); h=re.sub(r'[^\w\- ]','',h); return h.replace(' ','-')
def anchors(path):
    out=set();fence=False
    for l in open(path).read().split('\n'):
        if l.startswith('```'): fence=not fence
        m=re.match(r'^(#{1,6}) (.*)',l)
        if m and not fence: out.add(slug(m.group(2)))
    return out
bad=0
for f in ['README.md']+glob.glob('docs/**/*.md',recursive=True)+glob.glob('pod-templates/**/*.md',recursive=True):
    s=open(f).read()
    s=re.sub(r'```.*?```','',s,flags=re.S)
    for m in re.finditer(r'\[[^\]]*\]\(([^)\s]+)\)',s):
        link=m.group(1)
        if re.match(r'https?://|mailto:',link): continue
        path,_,anchor=link.partition('#')
        tgt=os.path.normpath(os.path.join(os.path.dirname(f),path)) if path else f
        if not os.path.exists(tgt): print('MISSING',f,link); bad+=1; continue
        if anchor and tgt.endswith('.md') and anchor not in anchors(tgt): print('ANCHOR',f,link); bad+=1
print(bad,'bad links'); sys.exit(1 if bad else 0)
