"""Deterministic benchmark data for bench/peers.sh.

    python3 data.py DIR JARS TOTAL_MIB BIG_MIB

Writes DIR/w1/jar-NNN.jar (JARS files of 64 KiB to 4 MiB, about TOTAL_MIB MiB in all,
sizes log-uniform), DIR/w2/big.bin (BIG_MIB MiB) and DIR/{w1,w2}.sha256 (sha256sum
format). The bytes come from a seeded PRNG: incompressible, and the same on every
machine for the same arguments. Does nothing when DIR/stamp already names them.
"""

import hashlib
import os
import random
import sys

KIB = 1024
MIB = 1024 * KIB
SMALLEST = 64 * KIB
LARGEST = 4 * MIB
CHUNK = 8 * MIB


def sizes(count, total):
    rng = random.Random(0x5EED)
    raw = [SMALLEST * (LARGEST / SMALLEST) ** rng.random() for _ in range(count)]
    scale = total / sum(raw)
    return [min(LARGEST, max(SMALLEST, round(r * scale / KIB) * KIB)) for r in raw]


def write(path, size, seed):
    rng = random.Random(seed)
    digest = hashlib.sha256()
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        left = size
        while left:
            block = rng.randbytes(min(CHUNK, left))
            f.write(block)
            digest.update(block)
            left -= len(block)
    os.replace(tmp, path)
    return digest.hexdigest()


def main():
    root, jars, total_mib, big_mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    stamp = f"v1 jars={jars} total_mib={total_mib} big_mib={big_mib}\n"
    stamp_path = os.path.join(root, "stamp")
    if os.path.exists(stamp_path) and open(stamp_path).read() == stamp:
        return
    for sub in ("w1", "w2"):
        d = os.path.join(root, sub)
        os.makedirs(d, exist_ok=True)
        for name in os.listdir(d):
            os.unlink(os.path.join(d, name))
    if os.path.exists(stamp_path):
        os.unlink(stamp_path)

    lines = []
    for i, size in enumerate(sizes(jars, total_mib * MIB)):
        name = f"jar-{i:03d}.jar"
        lines.append(f"{write(os.path.join(root, 'w1', name), size, 1000 + i)}  {name}\n")
    with open(os.path.join(root, "w1.sha256"), "w") as f:
        f.writelines(lines)
    big = write(os.path.join(root, "w2", "big.bin"), big_mib * MIB, 2)
    with open(os.path.join(root, "w2.sha256"), "w") as f:
        f.write(f"{big}  big.bin\n")
    with open(stamp_path, "w") as f:
        f.write(stamp)


if __name__ == "__main__":
    main()
