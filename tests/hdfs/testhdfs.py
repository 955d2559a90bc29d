#!/usr/bin/env python3
"""A protocol-level test HDFS: Hadoop's wire protocols, just enough of them.

    target/test-venv/bin/python tests/hdfs/testhdfs.py CONFIG.json [--watch-stdin]

One process runs every NameNode (Hadoop IPC, ClientProtocol) and every DataNode
(DataTransferProtocol, OP_READ_BLOCK) of a read-only cluster described by
CONFIG.json, each on its own listener on 127.0.0.1. When all listen it prints
one JSON line on stdout with the actual ports; it logs every call to stderr.
With --watch-stdin it exits when its stdin reaches end of file (so it cannot
outlive the test that started it). See tests/hdfs/README.md for the config, what
is covered, and what only a real cluster tests.

Messages are Apache Hadoop's .proto files as shipped in the hdfs-native crate,
compiled at start-up with grpcio-tools into target/hdfs-pb/<hash>/ (cached).
The files are found through $SPARK_LOCALIZER_TEST_HDFS_PROTOS (the crate's root
or its src/proto) or else `cargo metadata`. Needs Python 3.11 and protobuf.
"""

import base64
import fcntl
import hashlib
import hmac
import re
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "target" / "hdfs-pb"

IPC_VERSION = 9
AUTH_NONE = 0
AUTH_SASL = 0xDF  # -33 as a byte
SASL_CALL_ID = -33
CONTEXT_CALL_ID = -3
PING_CALL_ID = -4
CLIENT_PROTOCOL = "org.apache.hadoop.hdfs.protocol.ClientProtocol"
DATA_TRANSFER_VERSION = 28
OP_READ_BLOCK = 81
MAX_RPC_FRAME = 128 << 20
PACKET_DATA = 64 << 10  # data bytes per packet (rounded down to whole chunks)
SEGMENT_PACKETS = 16  # checksums are computed and cached 16 packets at a time
FIRST_BLOCK_ID = 1 << 30 | 1  # 1073741825, a real NameNode's first block id
FIRST_GENSTAMP = 1001
STATE_ID = 4242  # the "last written transaction id" every response carries
STANDBY_MSG = (
    "Operation category {} is not supported in state standby. "
    "Visit https://s.apache.org/sbnn-error"
)

pb = None  # namespace of the generated modules, set by load_protos()


def log(msg):
    stamp = time.strftime("%H:%M:%S", time.localtime()) + f".{int(time.time() * 1000) % 1000:03d}"
    sys.stderr.write(f"testhdfs {stamp} [{threading.current_thread().name}] {msg}\n")
    sys.stderr.flush()


def die(msg):
    log(f"FATAL: {msg}")
    sys.exit(2)


# --------------------------------------------------------------------------
# Protos: find Hadoop's .proto files, compile them once, import the modules.
# --------------------------------------------------------------------------

def host_triple():
    try:
        out = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("host: "):
                return line[6:].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return None


def proto_dir_from(path):
    """The dir with common/ and hdfs/ for a crate root or a src/proto path."""
    p = Path(path)
    for cand in (p, p / "src" / "proto"):
        if (cand / "common" / "RpcHeader.proto").is_file() and (cand / "hdfs" / "hdfs.proto").is_file():
            return cand
    return None


def find_protos():
    env = os.environ.get("SPARK_LOCALIZER_TEST_HDFS_PROTOS")
    if env:
        found = proto_dir_from(env)
        if not found:
            die(f"SPARK_LOCALIZER_TEST_HDFS_PROTOS={env} has no common/RpcHeader.proto and hdfs/hdfs.proto")
        return found
    # `cargo metadata` takes a moment: remember its answer per Cargo.lock.
    lock = REPO / "Cargo.lock"
    lock_sum = hashlib.sha256(lock.read_bytes()).hexdigest() if lock.is_file() else "-"
    remembered = CACHE / "proto-dir.json"
    try:
        known = json.loads(remembered.read_text())
        if known.get("cargo_lock") == lock_sum and proto_dir_from(known["dir"]):
            return Path(known["dir"])
    except (OSError, ValueError, KeyError):
        pass
    triple = host_triple()
    attempts = []
    base = ["cargo", "metadata", "--format-version", "1"]
    if triple:
        attempts.append(base + ["--offline", "--filter-platform", triple])
        attempts.append(base + ["--filter-platform", triple])
    attempts.append(base)
    errors = []
    for cmd in attempts:
        try:
            res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        except OSError as e:
            errors.append(f"{' '.join(cmd)}: {e}")
            break
        if res.returncode != 0:
            errors.append(f"{' '.join(cmd)}: {res.stderr.strip()[-300:]}")
            continue
        meta = json.loads(res.stdout)
        for pkg in meta.get("packages", []):
            if pkg.get("name") == "hdfs-native":
                found = proto_dir_from(Path(pkg["manifest_path"]).parent)
                if found:
                    CACHE.mkdir(parents=True, exist_ok=True)
                    tmp = remembered.with_suffix(f".{os.getpid()}.tmp")
                    tmp.write_text(json.dumps({"cargo_lock": lock_sum, "dir": str(found)}))
                    os.replace(tmp, remembered)
                    return found
        errors.append(f"{' '.join(cmd)}: no hdfs-native package with src/proto")
        break
    die("cannot locate hdfs-native's .proto files; set SPARK_LOCALIZER_TEST_HDFS_PROTOS\n  " + "\n  ".join(errors))


def proto_files(proto_dir):
    # ProtobufRpcEngine.proto and ProtobufRpcEngine2.proto both define
    # hadoop.common.RequestHeaderProto; Hadoop 3.3+ speaks the second.
    files = sorted((proto_dir / "common").glob("*.proto")) + sorted((proto_dir / "hdfs").glob("*.proto"))
    return [f for f in files if f.name != "ProtobufRpcEngine.proto"]


def compile_protos(proto_dir):
    try:
        import grpc_tools
        from google.protobuf import __version__ as pb_version
    except ImportError as e:
        die(f"{e}: install protobuf and grpcio-tools (scripts/test.sh puts them in target/test-venv)")
    files = proto_files(proto_dir)
    digest = hashlib.sha256()
    digest.update(f"protobuf {pb_version} grpcio-tools {getattr(grpc_tools, '__version__', '?')}\n".encode())
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    out = CACHE / digest.hexdigest()[:16]
    if (out / "OK").is_file():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)  # parallel tests start servers at once
        if (out / "OK").is_file():
            return out
        tmp = Path(tempfile.mkdtemp(prefix="gen-", dir=CACHE))
        well_known = Path(grpc_tools.__file__).parent / "_proto"
        cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto_dir / 'common'}", f"-I{proto_dir / 'hdfs'}"]
        if well_known.is_dir():
            cmd.append(f"-I{well_known}")
        cmd += [f"--python_out={tmp}"] + [str(f) for f in files]
        res = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            die(f"protoc failed ({' '.join(cmd)}):\n{res.stderr}")
        (tmp / "OK").write_text(f"generated from {proto_dir}\n")
        if out.exists():
            import shutil
            shutil.rmtree(out)
        os.replace(tmp, out)
        log(f"compiled {len(files)} .proto files from {proto_dir} into {out}")
    return out


def load_protos():
    global pb
    proto_dir = find_protos()
    out = compile_protos(proto_dir)
    sys.path.insert(0, str(out))
    import ClientNamenodeProtocol_pb2
    import datatransfer_pb2
    import HAServiceProtocol_pb2
    import hdfs_pb2
    import IpcConnectionContext_pb2
    import ProtobufRpcEngine2_pb2
    import RpcHeader_pb2
    import Security_pb2
    import acl_pb2

    class PB:
        rpc = RpcHeader_pb2
        ctx = IpcConnectionContext_pb2
        engine = ProtobufRpcEngine2_pb2
        nn = ClientNamenodeProtocol_pb2
        hdfs = hdfs_pb2
        dt = datatransfer_pb2
        ha = HAServiceProtocol_pb2
        sec = Security_pb2
        acl = acl_pb2
    pb = PB
    return proto_dir, out


# --------------------------------------------------------------------------
# Framing helpers
# --------------------------------------------------------------------------

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def delimited(msg):
    body = msg.SerializeToString()
    return varint(len(body)) + body


def split_delimited(buf, pos=0):
    """(message bytes, next position) of the varint-delimited message at pos."""
    n = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    if pos + n > len(buf):
        raise ValueError(f"truncated message ({n} bytes announced, {len(buf) - pos} there)")
    return bytes(buf[pos:pos + n]), pos + n


def read_exact(rf, n):
    data = rf.read(n)
    if data is None or len(data) < n:
        raise EOFError(f"connection closed ({0 if not data else len(data)} of {n} bytes)")
    return data


def read_delimited_stream(rf):
    n = shift = 0
    while True:
        b = rf.read(1)
        if not b:
            raise EOFError("connection closed")
        n |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            break
        shift += 7
        if shift > 35:
            raise ValueError("varint too long")
    return read_exact(rf, n)


# --------------------------------------------------------------------------
# Checksums: CRC32 (zlib) and CRC32C (pure Python, many chunks at a time)
# --------------------------------------------------------------------------

def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()
# Byte k of each table entry, as bytes.translate tables.
CRC32C_LANES = [bytes((v >> (8 * k)) & 0xFF for v in CRC32C_TABLE) for k in range(4)]
INVERT = bytes(255 - i for i in range(256))


def crc32c(data):
    """CRC32C (Castagnoli) of one buffer, a byte at a time."""
    c = 0xFFFFFFFF
    t = CRC32C_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def crc32c_chunks(data, bpc):
    """Big-endian CRC32C of each bpc-byte chunk of data (len a multiple of bpc).

    The table-driven byte loop runs once per byte position for all chunks at
    once: each of the 4 bytes of every chunk's CRC register is a lane of a big
    int, table look-ups are bytes.translate, XORs are big-int XORs. About 90 MB/s
    in CPython where a per-byte loop does 8.
    """
    n = len(data) // bpc
    if n == 0:
        return b""
    fb = int.from_bytes
    c0 = c1 = c2 = c3 = fb(b"\xff" * n, "little")
    t0, t1, t2, t3 = CRC32C_LANES
    for p in range(bpc):
        idx = (c0 ^ fb(data[p::bpc], "little")).to_bytes(n, "little")
        c0 = fb(idx.translate(t0), "little") ^ c1
        c1 = fb(idx.translate(t1), "little") ^ c2
        c2 = fb(idx.translate(t2), "little") ^ c3
        c3 = fb(idx.translate(t3), "little")
    out = bytearray(4 * n)
    out[0::4] = c3.to_bytes(n, "little").translate(INVERT)
    out[1::4] = c2.to_bytes(n, "little").translate(INVERT)
    out[2::4] = c1.to_bytes(n, "little").translate(INVERT)
    out[3::4] = c0.to_bytes(n, "little").translate(INVERT)
    return bytes(out)


def checksums(kind, data, bpc):
    """4 bytes (big-endian) per bpc-byte chunk of data; the last chunk may be short."""
    full = len(data) - len(data) % bpc
    if kind == "CRC32":
        crc = zlib.crc32
        return b"".join(struct.pack(">I", crc(data[i:i + bpc])) for i in range(0, len(data), bpc))
    out = crc32c_chunks(data[:full], bpc) if full else b""
    if full < len(data):
        out += struct.pack(">I", crc32c(data[full:]))
    return out


# --------------------------------------------------------------------------
# The namespace: files, their blocks and replicas, implied directories
# --------------------------------------------------------------------------

class Block:
    def __init__(self, file, index, block_id, offset, length, replicas, corrupt):
        self.file = file
        self.index = index
        self.id = block_id
        self.genstamp = FIRST_GENSTAMP + (block_id - FIRST_BLOCK_ID)
        self.offset = offset
        self.length = length
        self.replicas = replicas  # datanode ids, in the order the NameNode lists them
        self.corrupt = corrupt  # datanode ids whose replica is corrupt


class File:
    def __init__(self, path, source, length, block_size, mtime, file_id, spec):
        self.path = path
        self.source = source
        self.length = length
        self.block_size = block_size
        self.mtime = mtime
        self.file_id = file_id
        self.owner = spec.get("owner", "spark")
        self.group = spec.get("group", "supergroup")
        self.perm = parse_perm(spec.get("permission", 0o644))
        self.replication = 0
        self.blocks = []
        self.fd = os.open(source, os.O_RDONLY)


def parse_perm(value):
    return int(value, 8) if isinstance(value, str) else int(value)


def norm_path(path):
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts)


class Cluster:
    def __init__(self, cfg):
        self.cfg = cfg
        self.nameservice = cfg.get("nameservice")
        # kerberos: true refuses every client (no Kerberos accepted); an object
        # {"keytab": ..., "principal": "nn/localhost@REALM"} accepts Kerberos
        # (GSSAPI through SASL) with the service key from the keytab.
        krb = cfg.get("kerberos", False)
        self.kerberos = bool(krb)
        self.gss = None
        if isinstance(krb, dict):
            self.gss = Acceptor(krb)
        # Block access tokens: the NameNode signs one per located block with this
        # key (HMAC-SHA1, as Hadoop's BlockTokenSecretManager), the DataNodes
        # refuse a read without a valid one. "block_token_key_seen_by_datanodes"
        # lets a test make the DataNodes check with another key (a rolled key).
        self.block_token_key = cfg.get("block_token_key")
        self.dn_block_token_key = cfg.get("block_token_key_seen_by_datanodes", self.block_token_key)
        # dfs.data.transfer.protection=authentication: the DataNodes run SASL
        # (DIGEST-MD5 with the block token) before any op and refuse ops without it.
        self.dn_sasl = bool(cfg.get("data_transfer_protection", False))
        if self.dn_sasl and self.block_token_key is None:
            die("data_transfer_protection needs block_token_key")
        self.simple_sasl_reply = cfg.get("simple_sasl_reply", "success")
        if self.simple_sasl_reply not in ("success", "negotiate"):
            die("simple_sasl_reply must be \"success\" or \"negotiate\"")
        self.checksum = cfg.get("checksum", "CRC32C").upper()
        if self.checksum not in ("CRC32C", "CRC32"):
            die(f"checksum must be CRC32C or CRC32, not {self.checksum}")
        self.bpc = int(cfg.get("bytes_per_checksum", 512))
        if self.bpc <= 0:
            die("bytes_per_checksum must be positive")
        self.chunks_per_packet = max(1, PACKET_DATA // self.bpc)
        self.packet_data = self.chunks_per_packet * self.bpc
        self.segment = self.packet_data * SEGMENT_PACKETS
        self.default_block_size = int(cfg.get("block_size", 128 << 20))
        self.pool_id = cfg.get("pool_id", "BP-1234567890-127.0.0.1-1700000000000")
        self.namenodes = []
        for i, nn in enumerate(cfg.get("namenodes") or [{"name": "nn1"}]):
            state = nn.get("state", "active")
            if state not in ("active", "standby", "down"):
                die(f"namenode {nn}: state must be active, standby or down")
            self.namenodes.append({"name": nn.get("name", f"nn{i + 1}"), "port": int(nn.get("port", 0)), "state": state})
        self.datanodes = {}
        for i, dn in enumerate(cfg.get("datanodes") or []):
            dn_id = dn.get("id", f"dn{i + 1}")
            if dn_id in self.datanodes:
                die(f"datanode id {dn_id} twice")
            self.datanodes[dn_id] = {
                "id": dn_id,
                "port": int(dn.get("port", 0)),
                "down": bool(dn.get("down", False)),
                "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"testhdfs:{dn_id}")),
            }
        if not self.datanodes and cfg.get("files"):
            die("files need at least one datanode")
        self.files = {}
        self.dirs = {"/": int(time.time() * 1000)}
        for d in cfg.get("directories", []):
            self.add_dir(norm_path(d))
        self.blocks = {}
        next_block = FIRST_BLOCK_ID
        for i, spec in enumerate(cfg.get("files", [])):
            path = norm_path(spec["path"])
            if path in self.files or path in self.dirs:
                die(f"{path} given twice")
            source = spec["source"]
            try:
                st = os.stat(source)
            except OSError as e:
                die(f"file {path}: source {source}: {e}")
            block_size = int(spec.get("block_size", self.default_block_size))
            if block_size <= 0:
                die(f"file {path}: block_size must be positive")
            f = File(path, source, st.st_size, block_size, int(spec.get("mtime", st.st_mtime * 1000)), 16386 + i, spec)
            nblocks = -(-f.length // block_size)
            replicas = spec.get("replicas")
            if replicas is None:
                replicas = [list(self.datanodes)] * nblocks
            if len(replicas) != nblocks:
                die(f"file {path}: {nblocks} blocks but {len(replicas)} replica lists")
            corrupt = {}
            for c in spec.get("corrupt", []):
                b, dn = int(c["block"]), c["datanode"]
                if not 0 <= b < nblocks or dn not in replicas[b]:
                    die(f"file {path}: corrupt {c} names no replica")
                corrupt.setdefault(b, set()).add(dn)
            for b in range(nblocks):
                for dn in replicas[b]:
                    if dn not in self.datanodes:
                        die(f"file {path}: block {b} on unknown datanode {dn}")
                offset = b * block_size
                blk = Block(f, b, next_block, offset, min(block_size, f.length - offset), list(replicas[b]), corrupt.get(b, set()))
                next_block += 1
                f.blocks.append(blk)
                self.blocks[blk.id] = blk
            f.replication = max((len(r) for r in replicas), default=min(3, len(self.datanodes)))
            self.files[path] = f
            self.add_dir(path.rsplit("/", 1)[0] or "/", f.mtime)
        self.sum_cache = {}
        self.sum_lock = threading.Lock()

    def add_dir(self, path, mtime=None):
        while True:
            if path in self.files:
                die(f"{path} is both a file and a directory")
            self.dirs[path] = max(self.dirs.get(path, 0), mtime or int(time.time() * 1000))
            if path == "/":
                return
            path = path.rsplit("/", 1)[0] or "/"

    def children(self, path):
        prefix = path.rstrip("/") + "/"
        names = set()
        for p in list(self.files) + list(self.dirs):
            if p != "/" and p.startswith(prefix):
                names.add(p[len(prefix):].split("/", 1)[0])
        return sorted(names)

    # Checksums of one segment of a block, cached (they never change).
    def segment_sums(self, blk, seg):
        key = (blk.id, seg)
        sums = self.sum_cache.get(key)
        if sums is None:
            start = seg * self.segment
            end = min(blk.length, start + self.segment)
            data = os.pread(blk.file.fd, end - start, blk.offset + start)
            if len(data) != end - start:
                raise IOError(f"{blk.file.source} shrank: {len(data)} of {end - start} bytes at {blk.offset + start}")
            sums = checksums(self.checksum, data, self.bpc)
            with self.sum_lock:
                self.sum_cache[key] = sums
        return sums


# --------------------------------------------------------------------------
# Protobuf builders
# --------------------------------------------------------------------------

def file_status(cluster, path, local_name, need_location=False):
    H = pb.hdfs.HdfsFileStatusProto
    if path in cluster.files:
        f = cluster.files[path]
        st = H(
            fileType=H.IS_FILE, path=local_name.encode(), length=f.length,
            permission=pb.acl.FsPermissionProto(perm=f.perm), owner=f.owner, group=f.group,
            modification_time=f.mtime, access_time=f.mtime, block_replication=f.replication,
            blocksize=f.block_size, fileId=f.file_id, childrenNum=0, storagePolicy=0,
        )
        if need_location:
            st.locations.CopyFrom(located_blocks(cluster, f, 0, f.length))
        return st
    if path in cluster.dirs:
        return H(
            fileType=H.IS_DIR, path=local_name.encode(), length=0,
            permission=pb.acl.FsPermissionProto(perm=0o755), owner="spark", group="supergroup",
            modification_time=cluster.dirs[path], access_time=0, block_replication=0, blocksize=0,
            fileId=16385 if path == "/" else 100000 + sorted(cluster.dirs).index(path),
            childrenNum=len(cluster.children(path)),
        )
    return None


def datanode_info(cluster, dn_id):
    dn = cluster.datanodes[dn_id]
    now = int(time.time() * 1000)
    return pb.hdfs.DatanodeInfoProto(
        id=pb.hdfs.DatanodeIDProto(
            ipAddr="127.0.0.1", hostName="localhost", datanodeUuid=dn["uuid"],
            xferPort=dn["port"], infoPort=0, ipcPort=0, infoSecurePort=0,
        ),
        capacity=1 << 40, dfsUsed=1 << 30, remaining=(1 << 40) - (1 << 30), blockPoolUsed=1 << 30,
        lastUpdate=now, lastUpdateMonotonic=now, xceiverCount=1, location="/default-rack", nonDfsUsed=0,
        adminState=pb.hdfs.DatanodeInfoProto.NORMAL,
    )


def located_block(cluster, blk):
    lb = pb.hdfs.LocatedBlockProto(
        b=pb.hdfs.ExtendedBlockProto(poolId=cluster.pool_id, blockId=blk.id, generationStamp=blk.genstamp, numBytes=blk.length),
        offset=blk.offset,
        corrupt=False,  # the NameNode has not noticed: the client finds out
        blockToken=block_token(cluster, blk),
    )
    for dn in blk.replicas:
        lb.locs.append(datanode_info(cluster, dn))
        lb.isCached.append(False)
        lb.storageTypes.append(pb.hdfs.DISK)
        lb.storageIDs.append(f"DS-{cluster.datanodes[dn]['uuid']}")
    return lb


def located_blocks(cluster, f, offset, length):
    lbs = pb.hdfs.LocatedBlocksProto(fileLength=f.length, underConstruction=False, isLastBlockComplete=True)
    end = offset + length
    for blk in f.blocks:
        if blk.offset + blk.length > offset and blk.offset < end:
            lbs.blocks.append(located_block(cluster, blk))
    if f.blocks:
        lbs.lastBlock.CopyFrom(located_block(cluster, f.blocks[-1]))
    return lbs


# --------------------------------------------------------------------------
# Security: Kerberos (GSSAPI) for the NameNodes, block tokens for the DataNodes
# --------------------------------------------------------------------------

# The user the current NameNode connection authenticated as (for block tokens).
CONNECTION = threading.local()

SASL_LAYERS = {"authentication": 1, "integrity": 2, "privacy": 4}


class Acceptor:
    """The NameNode's side of Kerberos: MIT krb5 through python-gssapi, with the
    service key from a keytab (as a NameNode's dfs.namenode.keytab.file)."""

    def __init__(self, cfg):
        if cfg.get("krb5_config"):
            os.environ["KRB5_CONFIG"] = cfg["krb5_config"]
        try:
            import gssapi  # noqa: F401 (only Kerberos clusters need it)
        except ImportError as e:
            die(f"kerberos: the gssapi package is missing ({e}); scripts/test.sh installs it")
        self.gssapi = gssapi
        self.principal = cfg["principal"]  # e.g. nn/localhost@REALM
        service, _, rest = self.principal.partition("/")
        self.protocol, self.server_id = service, rest.split("@", 1)[0]
        # hadoop.rpc.protection: authentication, integrity (every later frame signed)
        # or privacy (every later frame encrypted).
        self.qop = cfg.get("qop", "authentication")
        if self.qop not in SASL_LAYERS:
            die(f"kerberos.qop must be one of {list(SASL_LAYERS)}")
        name = gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)
        try:
            self.creds = gssapi.Credentials(name=name, usage="accept", store={"keytab": cfg["keytab"]})
        except gssapi.exceptions.GSSError as e:
            die(f"kerberos: cannot use keytab {cfg['keytab']} for {self.principal}: {e.gen_message()}")

    def context(self):
        return self.gssapi.SecurityContext(creds=self.creds, usage="accept")


def write_vlong(i):
    """Hadoop's WritableUtils.writeVLong."""
    if -112 <= i <= 127:
        return struct.pack("b", i)
    length = -112
    if i < 0:
        i ^= -1
        length = -120
    tmp = i
    while tmp != 0:
        tmp >>= 8
        length -= 1
    n = -(length + 120) if length < -120 else -(length + 112)
    return struct.pack("b", length) + bytes((i >> (8 * k)) & 0xFF for k in range(n - 1, -1, -1))


def read_vlong(buf, pos):
    first = struct.unpack_from("b", buf, pos)[0]
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    n = -(first + 120) if negative else -(first + 112)
    value = int.from_bytes(buf[pos + 1:pos + 1 + n], "big")
    return (value ^ -1 if negative else value), pos + 1 + n


def write_text(text):
    """Text.writeString: a vint length, then UTF-8."""
    raw = text.encode()
    return write_vlong(len(raw)) + raw


def write_string(text):
    """WritableUtils.writeString: an int32 length, then UTF-8."""
    raw = text.encode()
    return struct.pack(">i", len(raw)) + raw


def block_token(cluster, blk):
    """A BlockTokenIdentifier (Hadoop's Writable layout: expiry, key id, user,
    block pool, block id, access modes) and its HMAC-SHA1 password."""
    if cluster.block_token_key is None:
        return pb.sec.TokenProto(identifier=b"", password=b"", kind="", service="")
    user = getattr(CONNECTION, "user", None) or "anonymous"
    expiry = int(time.time() * 1000) + 10 * 3600 * 1000
    ident = (write_vlong(expiry) + write_vlong(1) + write_string(user) + write_string(cluster.pool_id)
             + write_vlong(blk.id) + write_vlong(1) + write_text("READ"))
    password = hmac.new(cluster.block_token_key.encode(), ident, hashlib.sha1).digest()
    return pb.sec.TokenProto(identifier=ident, password=password, kind="HDFS_BLOCK_TOKEN", service="")


def check_block_token(cluster, token, block_id):
    """None when `token` grants reading `block_id`, else why not (a DataNode's words)."""
    if cluster.dn_block_token_key is None:
        return None
    if not token.identifier:
        return "Block token is missing (block access tokens are required)"
    want = hmac.new(cluster.dn_block_token_key.encode(), token.identifier, hashlib.sha1).digest()
    if not hmac.compare_digest(want, token.password):
        return "Block token with block_token_identifier can't be verified: the password does not match (InvalidToken)"
    try:
        ident = token.identifier
        expiry, pos = read_vlong(ident, 0)
        _, pos = read_vlong(ident, pos)
        for _ in range(2):
            (n,) = struct.unpack_from(">i", ident, pos)
            pos += 4 + n
        token_block, pos = read_vlong(ident, pos)
    except (struct.error, IndexError, ValueError):
        return "Block token identifier cannot be parsed"
    if token_block != block_id:
        return f"Block token is for blk_{token_block}, not blk_{block_id}"
    if expiry < time.time() * 1000:
        return "Block token is expired"
    return None


def block_token_password(key, identifier):
    return hmac.new(key.encode(), identifier, hashlib.sha1).digest()


class DigestServer:
    """The DataNode's side of SASL DIGEST-MD5 (RFC 2831, md5-sess, qop auth) as
    Hadoop's SaslDataTransferServer runs it: the user name is the block token's
    identifier in base64, the password its HMAC password in base64."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.nonce = base64.b64encode(os.urandom(12)).decode()

    def challenge(self):
        return f'realm="0",nonce="{self.nonce}",qop="auth",charset=utf-8,algorithm=md5-sess'.encode()

    @staticmethod
    def fields(text):
        out = {}
        for m in re.finditer(r'([a-zA-Z0-9-]+)=("([^"]*)"|([^,]*))', text):
            out[m.group(1)] = m.group(3) if m.group(3) is not None else m.group(4)
        return out

    def respond(self, response):
        """(rspauth, None) for a valid response, else (None, why)."""
        f = self.fields(response.decode("utf-8", "replace"))
        for k in ("username", "realm", "nonce", "cnonce", "nc", "qop", "digest-uri", "response"):
            if k not in f:
                return None, f"DIGEST-MD5 response lacks {k}"
        if f["nonce"] != self.nonce or f["qop"] != "auth":
            return None, "DIGEST-MD5 response with a wrong nonce or qop"
        try:
            identifier = base64.b64decode(f["username"], validate=True)
        except ValueError:
            return None, "DIGEST-MD5 user name is not a base64 block token identifier"
        key = self.cluster.dn_block_token_key or ""
        password = base64.b64encode(block_token_password(key, identifier)).decode()
        h = lambda b: hashlib.md5(b).digest()  # noqa: E731
        a1 = h(f"{f['username']}:{f['realm']}:{password}".encode()) + f":{f['nonce']}:{f['cnonce']}".encode()
        ha1 = h(a1).hex()

        def digest(a2):
            return h(f"{ha1}:{f['nonce']}:{f['nc']}:{f['cnonce']}:{f['qop']}:{h(a2.encode()).hex()}".encode()).hex()
        if not hmac.compare_digest(digest(f"AUTHENTICATE:{f['digest-uri']}"), f["response"]):
            return None, "DIGEST-MD5: the response does not match the block token's password (InvalidToken)"
        return f"rspauth={digest(':' + f['digest-uri'])}".encode(), None


# --------------------------------------------------------------------------
# NameNode: Hadoop IPC
# --------------------------------------------------------------------------

class RpcError(Exception):
    def __init__(self, exception_class, message, detail=None):
        super().__init__(f"{exception_class}: {message}")
        self.exception_class = exception_class
        self.message = message
        self.detail = detail


class NameNodeConnection:
    def __init__(self, cluster, nn, sock, peer):
        self.cluster = cluster
        self.nn = nn
        self.sock = sock
        self.peer = peer
        self.rf = sock.makefile("rb", buffering=1 << 16)
        self.user = None
        # After a Kerberos exchange with QOP integrity or privacy: the GSSAPI
        # context every later frame is wrapped with (both ways), and what is unwrapped
        # but not yet read.
        self.wrap = None
        self.privacy = False
        self.inbuf = bytearray()

    def tag(self):
        return f"{self.nn['name']}({self.nn['state']}) {self.peer[0]}:{self.peer[1]}"

    def run(self):
        try:
            self.serve()
        except (EOFError, ConnectionError) as e:
            log(f"{self.tag()}: connection closed: {e}")
        except Exception:
            log(f"{self.tag()}: error:\n{traceback.format_exc()}")
        finally:
            try:
                self.sock.close()
            except OSError:
                pass

    def send(self, call_id, status, header_req=None, message=None, exception=None, detail=None):
        R = pb.rpc.RpcResponseHeaderProto
        h = R(callId=call_id & 0xFFFFFFFF, status=status, serverIpcVersionNum=IPC_VERSION)
        if header_req is not None:
            h.clientId = header_req.clientId
            h.retryCount = header_req.retryCount
        if status == R.SUCCESS:
            h.stateId = STATE_ID
        if exception is not None:
            h.exceptionClassName = exception[0]
            h.errorMsg = exception[1]
        if detail is not None:
            h.errorDetail = detail
        body = delimited(h) + (delimited(message) if message is not None else b"")
        frame = struct.pack(">I", len(body)) + body
        if self.wrap is not None:
            # Hadoop's Server.wrapWithSasl: the whole response, wrapped, as a SASL WRAP.
            S = pb.rpc.RpcSaslProto
            token = self.wrap.wrap(frame, self.privacy).message
            outer = delimited(R(callId=SASL_CALL_ID & 0xFFFFFFFF, status=R.SUCCESS, serverIpcVersionNum=IPC_VERSION))
            outer += delimited(S(state=S.WRAP, token=token))
            frame = struct.pack(">I", len(outer)) + outer
        self.sock.sendall(frame)

    def fatal(self, call_id, exception_class, message, detail):
        R = pb.rpc.RpcResponseHeaderProto
        log(f"{self.tag()}: FATAL {exception_class}: {message}")
        self.send(call_id, R.FATAL, exception=(exception_class, message), detail=detail)
        # Let the client read it before the close (no RST for unread data).
        try:
            self.sock.shutdown(socket.SHUT_WR)
            self.sock.settimeout(0.5)
            while self.sock.recv(65536):
                pass
        except OSError:
            pass

    def read_frame(self):
        if self.wrap is None:
            return self.read_plain_frame()
        # Every frame comes wrapped in a SASL WRAP (call id -33).
        S = pb.rpc.RpcSaslProto
        while len(self.inbuf) < 4 or len(self.inbuf) < 4 + struct.unpack(">I", self.inbuf[:4])[0]:
            header, body, pos = self.read_plain_frame()
            raw, _ = split_delimited(body, pos)
            msg = S.FromString(raw)
            if header.callId != SASL_CALL_ID or msg.state != S.WRAP:
                raise ValueError(f"an unwrapped frame (call {header.callId}) after QOP {self.cluster.gss.qop} was agreed")
            res = self.wrap.unwrap(msg.token)
            if self.privacy and not res.encrypted:
                raise ValueError("a frame not encrypted after QOP privacy was agreed")
            self.inbuf += res.message
        (length,) = struct.unpack(">I", self.inbuf[:4])
        body = bytes(self.inbuf[4:4 + length])
        del self.inbuf[:4 + length]
        raw, pos = split_delimited(body)
        return pb.rpc.RpcRequestHeaderProto.FromString(raw), body, pos

    def read_plain_frame(self):
        (length,) = struct.unpack(">I", read_exact(self.rf, 4))
        if length > MAX_RPC_FRAME:
            raise ValueError(f"RPC frame of {length} bytes")
        body = read_exact(self.rf, length)
        raw, pos = split_delimited(body)
        header = pb.rpc.RpcRequestHeaderProto.FromString(raw)
        return header, body, pos

    def serve(self):
        R = pb.rpc.RpcResponseHeaderProto
        preamble = read_exact(self.rf, 7)
        if preamble[:4] != b"hrpc":
            log(f"{self.tag()}: not Hadoop IPC (starts with {preamble[:4]!r}); closing")
            return
        version, service_class, auth = preamble[4], preamble[5], preamble[6]
        log(f"{self.tag()}: connection: ipc version {version}, service class {service_class}, "
            f"auth protocol {'SASL' if auth == AUTH_SASL else 'NONE' if auth == AUTH_NONE else auth}")
        if version != IPC_VERSION:
            self.fatal(-1, "org.apache.hadoop.ipc.RPC$VersionMismatch",
                       f"Server IPC version {IPC_VERSION} cannot communicate with client version {version}",
                       R.FATAL_VERSION_MISMATCH)
            return
        if auth == AUTH_NONE:
            if self.cluster.kerberos:
                # What a secure Hadoop server answers a client that did not start SASL.
                self.fatal(SASL_CALL_ID, "org.apache.hadoop.security.AccessControlException",
                           "SIMPLE authentication is not enabled.  Available:[TOKEN, KERBEROS]",
                           R.FATAL_UNAUTHORIZED)
                return
        elif auth == AUTH_SASL:
            if not self.sasl():
                return
        else:
            self.fatal(SASL_CALL_ID, "org.apache.hadoop.ipc.IpcException", f"Unknown auth protocol:{auth}",
                       R.FATAL_UNAUTHORIZED)
            return

        header, body, pos = self.read_frame()
        if header.callId != CONTEXT_CALL_ID:
            self.fatal(header.callId, "org.apache.hadoop.ipc.IpcException",
                       f"Connection context expected, got call id {header.callId}", R.FATAL_INVALID_RPC_HEADER)
            return
        raw, _ = split_delimited(body, pos)
        ctx = pb.ctx.IpcConnectionContextProto.FromString(raw)
        self.user = ctx.userInfo.effectiveUser if ctx.HasField("userInfo") else None
        log(f"{self.tag()}: context: protocol {ctx.protocol}, user {self.user!r}"
            + (f", real user {ctx.userInfo.realUser!r}" if ctx.userInfo.HasField("realUser") else ""))

        while True:
            try:
                header, body, pos = self.read_frame()
            except EOFError:
                log(f"{self.tag()}: client closed the connection")
                return
            if header.callId == PING_CALL_ID:
                continue
            if header.callId < 0:
                self.fatal(header.callId, "org.apache.hadoop.ipc.IpcException",
                           f"Unexpected call id {header.callId}", R.FATAL_INVALID_RPC_HEADER)
                return
            raw, pos = split_delimited(body, pos)
            req_header = pb.engine.RequestHeaderProto.FromString(raw)
            request, _ = split_delimited(body, pos) if pos < len(body) else (b"", pos)
            self.call(header, req_header, request)

    def sasl(self):
        """SASL over IPC (call id -33). True when the connection goes on."""
        R = pb.rpc.RpcResponseHeaderProto
        S = pb.rpc.RpcSaslProto
        while True:
            header, body, pos = self.read_frame()
            if header.callId != SASL_CALL_ID:
                self.fatal(header.callId, "org.apache.hadoop.security.AccessControlException",
                           "SASL negotiation expected", R.FATAL_UNAUTHORIZED)
                return False
            raw, _ = split_delimited(body, pos)
            msg = S.FromString(raw)
            log(f"{self.tag()}: SASL {S.SaslState.Name(msg.state)} "
                f"{[(a.method, a.mechanism) for a in msg.auths]}")
            if msg.state == S.NEGOTIATE:
                if self.cluster.gss:
                    gss = self.cluster.gss
                    reply = S(state=S.NEGOTIATE)
                    reply.auths.add(method="KERBEROS", mechanism="GSSAPI", protocol=gss.protocol, serverId=gss.server_id)
                elif self.cluster.kerberos:
                    reply = S(state=S.NEGOTIATE)
                    reply.auths.add(method="KERBEROS", mechanism="GSSAPI", protocol="nn", serverId="localhost")
                elif self.cluster.simple_sasl_reply == "negotiate":
                    reply = S(state=S.NEGOTIATE)
                    reply.auths.add(method="SIMPLE", mechanism="")
                else:
                    # A SIMPLE-only Hadoop server answers NEGOTIATE with SUCCESS:
                    # the client switches to simple auth, no INITIATE follows.
                    self.send(SASL_CALL_ID, R.SUCCESS, message=S(state=S.SUCCESS))
                    log(f"{self.tag()}: SASL SUCCESS sent (SIMPLE)")
                    return True
                self.send(SASL_CALL_ID, R.SUCCESS, message=reply)
                log(f"{self.tag()}: SASL NEGOTIATE sent offering {[a.method for a in reply.auths]}")
            elif msg.state == S.INITIATE:
                method = msg.auths[0].method if msg.auths else ""
                if method == "SIMPLE" and not self.cluster.kerberos:
                    return True  # no reply: the client goes on with the connection context
                if method == "KERBEROS" and self.cluster.gss:
                    return self.kerberos(msg.token)
                if method == "KERBEROS":
                    self.fatal(SASL_CALL_ID, "javax.security.sasl.SaslException",
                               "GSS initiate failed [Caused by GSSException: the test HDFS accepts no Kerberos ticket]",
                               R.FATAL_UNAUTHORIZED)
                else:
                    self.fatal(SASL_CALL_ID, "org.apache.hadoop.security.AccessControlException",
                               f"Client cannot authenticate via:[{method}]", R.FATAL_UNAUTHORIZED)
                return False
            else:
                self.fatal(SASL_CALL_ID, "javax.security.sasl.SaslException",
                           f"Unexpected SASL state {S.SaslState.Name(msg.state)}", R.FATAL_UNAUTHORIZED)
                return False

    def sasl_reply(self, state, token=None):
        S = pb.rpc.RpcSaslProto
        msg = S(state=state)
        if token is not None:
            msg.token = token
        self.send(SASL_CALL_ID, pb.rpc.RpcResponseHeaderProto.SUCCESS, message=msg)

    def sasl_response(self):
        """The client's next SASL RESPONSE token, or None (after a fatal reply)."""
        S = pb.rpc.RpcSaslProto
        header, body, pos = self.read_frame()
        raw, _ = split_delimited(body, pos)
        msg = S.FromString(raw)
        if header.callId != SASL_CALL_ID or msg.state != S.RESPONSE:
            self.fatal(SASL_CALL_ID, "javax.security.sasl.SaslException",
                       f"SASL RESPONSE expected, got {S.SaslState.Name(msg.state)}",
                       pb.rpc.RpcResponseHeaderProto.FATAL_UNAUTHORIZED)
            return None
        return msg.token

    def gss_failed(self, e):
        # What Hadoop's SaslRpcServer sends when the GSSAPI exchange fails.
        detail = e.gen_message() if hasattr(e, "gen_message") else str(e)
        # python-gssapi says "Major (…): …, Minor (…): Ticket not yet valid": Java names the minor.
        detail = detail.rsplit("): ", 1)[-1] if "Minor (" in detail else detail
        self.fatal(SASL_CALL_ID, "javax.security.sasl.SaslException",
                   f"GSS initiate failed [Caused by GSSException: Failure unspecified at GSS-API level "
                   f"(Mechanism level: {detail})]", pb.rpc.RpcResponseHeaderProto.FATAL_UNAUTHORIZED)
        return False

    def kerberos(self, token):
        """SASL GSSAPI (RFC 4752) as Hadoop's server runs it: the context
        tokens, then the security-layer offer and the client's choice, wrapped."""
        S = pb.rpc.RpcSaslProto
        gss = self.cluster.gss
        ctx = gss.context()
        try:
            while True:
                out = ctx.step(token)
                if ctx.complete:
                    break
                self.sasl_reply(S.CHALLENGE, out or b"")
                token = self.sasl_response()
                if token is None:
                    return False
            if out:
                # The AP-REP (mutual authentication); the client answers empty.
                self.sasl_reply(S.CHALLENGE, out)
                if self.sasl_response() is None:
                    return False
            offer = bytes([SASL_LAYERS[gss.qop], 0x00, 0xFF, 0xFF])
            self.sasl_reply(S.CHALLENGE, ctx.wrap(offer, False).message)
            answer = self.sasl_response()
            if answer is None:
                return False
            chosen = ctx.unwrap(answer).message
        except gss.gssapi.exceptions.GSSError as e:
            log(f"{self.tag()}: Kerberos authentication failed: {e.gen_message()}")
            return self.gss_failed(e)
        if len(chosen) < 4 or chosen[0] != SASL_LAYERS[gss.qop]:
            return self.gss_failed(ValueError(f"client chose security layer {chosen[:1].hex()}, offered {offer[:1].hex()}"))
        principal = str(ctx.initiator_name)
        self.kerberos_user = principal
        CONNECTION.user = principal.split("@", 1)[0].split("/", 1)[0]
        log(f"{self.tag()}: Kerberos: authenticated {principal} (qop {gss.qop})")
        self.sasl_reply(S.SUCCESS)
        if gss.qop != "authentication":
            self.wrap, self.privacy = ctx, gss.qop == "privacy"
        return True

    def call(self, header, req_header, request):
        R = pb.rpc.RpcResponseHeaderProto
        method = req_header.methodName
        try:
            if req_header.declaringClassProtocolName != CLIENT_PROTOCOL:
                raise RpcError("org.apache.hadoop.ipc.RpcNoSuchProtocolException",
                               f"Unknown protocol: {req_header.declaringClassProtocolName}", R.ERROR_NO_SUCH_PROTOCOL)
            handler = METHODS.get(method)
            if handler is None:
                log(f"{self.tag()}: UNKNOWN METHOD {method} (call {header.callId}): answering RpcNoSuchMethodException")
                raise RpcError("org.apache.hadoop.ipc.RpcNoSuchMethodException",
                               f"Unknown method {method} called on {CLIENT_PROTOCOL} protocol.", R.ERROR_NO_SUCH_METHOD)
            req_type, category, fn = handler
            req = req_type.FromString(request)
            if self.nn["state"] == "standby" and category is not None:
                raise RpcError("org.apache.hadoop.ipc.StandbyException", STANDBY_MSG.format(category))
            resp = fn(self.cluster, req, self.nn)
            log(f"{self.tag()}: {method}({summary(req)}) call {header.callId} -> OK")
            self.send(header.callId, R.SUCCESS, header, message=resp)
        except RpcError as e:
            log(f"{self.tag()}: {method} call {header.callId} -> {e.exception_class}: {e.message}")
            self.send(header.callId, R.ERROR, header, exception=(e.exception_class, e.message),
                      detail=e.detail if e.detail is not None else R.ERROR_APPLICATION)


def summary(req):
    fields = []
    for fd, value in req.ListFields():
        if fd.type == fd.TYPE_BYTES:
            value = value[:40]
        text = repr(value) if not hasattr(value, "ListFields") else "{...}"
        fields.append(f"{fd.name}={text[:80]}")
    return ", ".join(fields)


def file_not_found(msg):
    return RpcError("java.io.FileNotFoundException", msg)


def m_get_server_defaults(cluster, req, nn):
    return pb.nn.GetServerDefaultsResponseProto(serverDefaults=pb.hdfs.FsServerDefaultsProto(
        blockSize=cluster.default_block_size, bytesPerChecksum=cluster.bpc, writePacketSize=64 << 10,
        replication=min(3, max(1, len(cluster.datanodes))), fileBufferSize=4096, encryptDataTransfer=False,
        trashInterval=0,
        checksumType=pb.hdfs.CHECKSUM_CRC32C if cluster.checksum == "CRC32C" else pb.hdfs.CHECKSUM_CRC32,
    ))


def m_get_file_info(cluster, req, nn):
    st = file_status(cluster, norm_path(req.src), "")
    resp = pb.nn.GetFileInfoResponseProto()
    if st is not None:
        resp.fs.CopyFrom(st)
    return resp


def m_get_block_locations(cluster, req, nn):
    path = norm_path(req.src)
    if path in cluster.dirs:
        raise file_not_found(f"Path is not a file: {path}")
    f = cluster.files.get(path)
    if f is None:
        raise file_not_found(f"File does not exist: {path}")
    return pb.nn.GetBlockLocationsResponseProto(locations=located_blocks(cluster, f, req.offset, req.length))


def m_get_listing(cluster, req, nn):
    path = norm_path(req.src)
    resp = pb.nn.GetListingResponseProto()
    if path in cluster.files:
        resp.dirList.CopyFrom(pb.hdfs.DirectoryListingProto(remainingEntries=0))
        resp.dirList.partialListing.append(file_status(cluster, path, "", req.needLocation))
        return resp
    if path not in cluster.dirs:
        return resp  # no dirList: what a NameNode answers for a missing path
    after = req.startAfter.decode()
    names = [n for n in cluster.children(path) if n > after]
    limit = int(cluster.cfg.get("listing_limit", 1000))
    page, rest = names[:limit], names[limit:]
    resp.dirList.CopyFrom(pb.hdfs.DirectoryListingProto(remainingEntries=len(rest)))
    base = path.rstrip("/")
    for name in page:
        resp.dirList.partialListing.append(file_status(cluster, f"{base}/{name}", name, req.needLocation))
    return resp


def m_get_fs_stats(cluster, req, nn):
    return pb.nn.GetFsStatsResponseProto(capacity=1 << 40, used=1 << 30, remaining=(1 << 40) - (1 << 30),
                                         under_replicated=0, corrupt_blocks=0, missing_blocks=0)


def m_msync(cluster, req, nn):
    return pb.nn.MsyncResponseProto()


def m_renew_lease(cluster, req, nn):
    return pb.nn.RenewLeaseResponseProto()


def m_get_ha_service_state(cluster, req, nn):
    # Answered in any state: it is how a client finds out which NameNode is which.
    states = {"active": pb.ha.ACTIVE, "standby": pb.ha.STANDBY}
    return pb.nn.HAServiceStateResponseProto(state=states[nn["state"]])


METHODS = {}  # method name -> (request type, operation category or None, handler)


def register_methods():
    nn = pb.nn
    METHODS.update({
        "getServerDefaults": (nn.GetServerDefaultsRequestProto, "READ", m_get_server_defaults),
        "getFileInfo": (nn.GetFileInfoRequestProto, "READ", m_get_file_info),
        "getBlockLocations": (nn.GetBlockLocationsRequestProto, "READ", m_get_block_locations),
        "getListing": (nn.GetListingRequestProto, "READ", m_get_listing),
        "getFsStats": (nn.GetFsStatusRequestProto, "READ", m_get_fs_stats),
        "msync": (nn.MsyncRequestProto, "READ", m_msync),
        "renewLease": (nn.RenewLeaseRequestProto, "WRITE", m_renew_lease),
        "getHAServiceState": (nn.HAServiceStateRequestProto, None, m_get_ha_service_state),
    })


# --------------------------------------------------------------------------
# DataNode: DataTransferProtocol, OP_READ_BLOCK
# --------------------------------------------------------------------------

class DataNodeConnection:
    def __init__(self, cluster, dn, sock, peer):
        self.cluster = cluster
        self.dn = dn
        self.sock = sock
        self.peer = peer
        self.rf = sock.makefile("rb", buffering=1 << 16)
        self.current = None  # the read being served, for the log
        self.sasl_done = False

    def tag(self):
        return f"{self.dn['id']} {self.peer[0]}:{self.peer[1]}"

    def sasl_message(self, status, payload=None, message=None):
        M = pb.dt.DataTransferEncryptorMessageProto
        m = M(status=status)
        if payload is not None:
            m.payload = payload
        if message is not None:
            m.message = message
        self.sock.sendall(delimited(m))

    def sasl_handshake(self):
        """SASL on the data transfer connection (dfs.data.transfer.protection=
        authentication): DIGEST-MD5 keyed by the block token. True when it passed."""
        M = pb.dt.DataTransferEncryptorMessageProto
        first = M.FromString(read_delimited_stream(self.rf))
        if first.status != M.SUCCESS:
            log(f"{self.tag()}: SASL: client opened with status {first.status}; closing")
            return False
        server = DigestServer(self.cluster)
        self.sasl_message(M.SUCCESS, payload=server.challenge())
        answer = M.FromString(read_delimited_stream(self.rf))
        rspauth, why = server.respond(answer.payload)
        if why:
            # Hadoop's sendGenericSaslErrorMessage: status ERROR and a message, no payload.
            log(f"{self.tag()}: SASL refused: {why}")
            self.sasl_message(M.ERROR, message=why)
            return False
        self.sasl_message(M.SUCCESS, payload=rspauth)
        self.sasl_done = True
        log(f"{self.tag()}: SASL: DIGEST-MD5 with the block token (qop auth)")
        return True

    def run(self):
        try:
            ops = 0
            while True:
                first = self.rf.read(2)
                if not first:
                    log(f"{self.tag()}: client closed the connection after {ops} op(s)")
                    return
                if len(first) < 2:
                    raise EOFError("connection closed in the op header")
                if first == b"\xde\xad" and self.cluster.dn_sasl and not self.sasl_done:
                    if read_exact(self.rf, 2) != b"\xbe\xef":
                        log(f"{self.tag()}: bad SASL handshake magic; closing")
                        return
                    if not self.sasl_handshake():
                        return
                    continue
                (version,) = struct.unpack(">H", first)
                if version != DATA_TRANSFER_VERSION:
                    log(f"{self.tag()}: data transfer version {version:#x}, expected {DATA_TRANSFER_VERSION}"
                        + (" (SASL handshake magic: not supported)" if first == b"\xde\xad" else "") + "; closing")
                    return
                if self.cluster.dn_sasl and not self.sasl_done:
                    log(f"{self.tag()}: an op without the SASL handshake (data transfer protection is on); closing")
                    return
                op = read_exact(self.rf, 1)[0]
                if op != OP_READ_BLOCK:
                    log(f"{self.tag()}: op {op} is not supported (read-only test DataNode); closing")
                    self.respond(pb.dt.ERROR_UNSUPPORTED, f"op {op} not supported by the test DataNode")
                    return
                ops += 1
                if not self.read_block(pb.dt.OpReadBlockProto.FromString(read_delimited_stream(self.rf))):
                    return
        except (EOFError, ConnectionError) as e:
            during = f" during {self.current}" if self.current else ""
            log(f"{self.tag()}: connection closed{during}: {e}")
        except Exception:
            log(f"{self.tag()}: error:\n{traceback.format_exc()}")
        finally:
            try:
                self.sock.close()
            except OSError:
                pass

    def respond(self, status, message=None, checksum_info=None):
        r = pb.dt.BlockOpResponseProto(status=status)
        if message:
            r.message = message
        if checksum_info is not None:
            r.readOpChecksumInfo.CopyFrom(checksum_info)
        self.sock.sendall(delimited(r))

    def read_block(self, req):
        """Serves one OP_READ_BLOCK; True if the connection may carry another op."""
        c = self.cluster
        eb = req.header.baseHeader.block
        offset, length = req.offset, req.len
        blk = c.blocks.get(eb.blockId)
        where = f"blk_{eb.blockId}_{eb.generationStamp} [{offset}, +{length})"
        if eb.poolId != c.pool_id or blk is None or self.dn["id"] not in blk.replicas:
            msg = f"Replica not found for BP-block {eb.poolId}:blk_{eb.blockId}_{eb.generationStamp}"
            log(f"{self.tag()}: OP_READ_BLOCK {where}: {msg}")
            self.respond(pb.dt.ERROR, f"ReplicaNotFoundException: {msg}")
            return True
        if eb.generationStamp > blk.genstamp:
            msg = f"Replica gen stamp < block genstamp, block=blk_{eb.blockId}_{eb.generationStamp}"
            log(f"{self.tag()}: OP_READ_BLOCK {where}: {msg}")
            self.respond(pb.dt.ERROR, f"IOException: {msg}")
            return True
        if offset > blk.length or offset + length > blk.length:
            msg = f"Offset {offset} and length {length} don't match block blk_{blk.id} ( blockLen {blk.length} )"
            log(f"{self.tag()}: OP_READ_BLOCK {where}: {msg}")
            self.respond(pb.dt.ERROR, f"IOException: {msg}")
            return True

        why = check_block_token(c, req.header.baseHeader.token, eb.blockId)
        if why:
            log(f"{self.tag()}: OP_READ_BLOCK {where}: access token refused: {why}")
            self.respond(pb.dt.ERROR_ACCESS_TOKEN,
                         f"Got access token error for OP_READ_BLOCK, self=/127.0.0.1:{self.dn['port']}, "
                         f"remote=/{self.peer[0]}:{self.peer[1]}, for block {eb.poolId}:blk_{eb.blockId}_{eb.generationStamp}: {why}")
            return True
        corrupt = self.dn["id"] in blk.corrupt
        log(f"{self.tag()}: OP_READ_BLOCK {where}" + (" from a CORRUPT replica" if corrupt else ""))
        self.current = f"OP_READ_BLOCK {where}"
        send_sums = req.sendChecksums
        bpc = c.bpc
        start = offset - offset % bpc
        end = min(blk.length, -(-(offset + length) // bpc) * bpc)
        kind = (pb.hdfs.CHECKSUM_CRC32C if c.checksum == "CRC32C" else pb.hdfs.CHECKSUM_CRC32) if send_sums else pb.hdfs.CHECKSUM_NULL
        info = pb.dt.ReadOpChecksumInfoProto(checksum=pb.dt.ChecksumProto(type=kind, bytesPerChecksum=bpc), chunkOffset=start)
        self.respond(pb.dt.SUCCESS, checksum_info=info)
        began = time.monotonic()
        pos, seqno = start, 0
        while pos < end:
            pk_end = min(end, (pos // c.packet_data + 1) * c.packet_data)
            data = os.pread(blk.file.fd, pk_end - pos, blk.offset + pos)
            if len(data) != pk_end - pos:
                raise IOError(f"{blk.file.source} shrank while being served")
            sums = b""
            if send_sums:
                seg = pos // c.segment
                seg_sums = c.segment_sums(blk, seg)
                first = (pos - seg * c.segment) // bpc
                sums = seg_sums[4 * first:4 * (first + -(-(pk_end - pos) // bpc))]
            if corrupt:
                flipped = bytearray(data)
                flipped[0::bpc] = flipped[0::bpc].translate(INVERT)
                data = bytes(flipped)
            self.packet(pos, seqno, False, sums, data)
            pos, seqno = pk_end, seqno + 1
        self.packet(end if end > start else start, seqno, True, b"", b"")
        took = time.monotonic() - began
        rate = (end - start) / took / (1 << 20) if took > 0 else 0
        log(f"{self.tag()}: sent {where}: [{start}, {end}) in {seqno + 1} packets, "
            f"{took * 1000:.0f} ms ({rate:.0f} MiB/s)")
        status = pb.dt.ClientReadStatusProto.FromString(read_delimited_stream(self.rf))
        log(f"{self.tag()}: client read status {pb.dt.Status.Name(status.status)}")
        self.current = None
        return True

    def packet(self, offset, seqno, last, sums, data):
        header = pb.dt.PacketHeaderProto(offsetInBlock=offset, seqno=seqno, lastPacketInBlock=last, dataLen=len(data)).SerializeToString()
        # Hadoop's PacketReceiver: the int32 payload length counts itself, the
        # checksums and the data (not the header, which has its own int16 length).
        self.sock.sendall(b"".join((struct.pack(">IH", 4 + len(sums) + len(data), len(header)), header, sums, data)))


# --------------------------------------------------------------------------
# Listeners
# --------------------------------------------------------------------------

def bind(port, listen=True):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError as e:
        die(f"cannot bind 127.0.0.1:{port}: {e}")
    if listen:
        s.listen(128)
    return s


def accept_loop(name, sock, make_handler):
    n = 0
    while True:
        conn, peer = sock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        n += 1
        handler = make_handler(conn, peer)
        threading.Thread(target=handler.run, name=f"{name}-{n}", daemon=True).start()


def main():
    args = sys.argv[1:]
    watch_stdin = "--watch-stdin" in args
    args = [a for a in args if a != "--watch-stdin"]
    if len(args) != 1:
        sys.stderr.write(__doc__)
        sys.exit(2)
    try:
        cfg = json.loads(Path(args[0]).read_text())
    except (OSError, ValueError) as e:
        die(f"config {args[0]}: {e}")
    proto_dir, pb_dir = load_protos()
    register_methods()
    cluster = Cluster(cfg)

    # Bind everything first (a "down" node's port is bound but not listening,
    # so it is reserved and refuses connections), then start accepting.
    sockets = []
    for nn in cluster.namenodes:
        s = bind(nn["port"], listen=nn["state"] != "down")
        nn["port"] = s.getsockname()[1]
        sockets.append(("nn", nn, s))
    for dn in cluster.datanodes.values():
        s = bind(dn["port"], listen=not dn["down"])
        dn["port"] = s.getsockname()[1]
        sockets.append(("dn", dn, s))
    for kind, node, s in sockets:
        if kind == "nn" and node["state"] != "down":
            def make(conn, peer, node=node):
                return NameNodeConnection(cluster, node, conn, peer)
            threading.Thread(target=accept_loop, args=(node["name"], s, make), name=f"{node['name']}-accept", daemon=True).start()
        elif kind == "dn" and not node["down"]:
            def make(conn, peer, node=node):
                return DataNodeConnection(cluster, node, conn, peer)
            threading.Thread(target=accept_loop, args=(node["id"], s, make), name=f"{node['id']}-accept", daemon=True).start()

    ready = {
        "ready": True,
        "pid": os.getpid(),
        "nameservice": cluster.nameservice,
        "namenodes": [{"name": nn["name"], "port": nn["port"], "state": nn["state"]} for nn in cluster.namenodes],
        "datanodes": [{"id": dn["id"], "port": dn["port"], "uuid": dn["uuid"], "down": dn["down"]} for dn in cluster.datanodes.values()],
        "pool_id": cluster.pool_id,
        "files": [
            {"path": f.path, "length": f.length,
             "blocks": [{"id": b.id, "genstamp": b.genstamp, "offset": b.offset, "length": b.length, "replicas": b.replicas} for b in f.blocks]}
            for f in cluster.files.values()
        ],
        "protos": str(proto_dir),
        "generated": str(pb_dir),
    }
    log("ready: " + ", ".join(f"{nn['name']}={nn['port']}({nn['state']})" for nn in cluster.namenodes)
        + "; " + ", ".join(f"{dn['id']}={dn['port']}" + ("(down)" if dn["down"] else "") for dn in cluster.datanodes.values())
        + f"; {len(cluster.files)} file(s), {cluster.checksum}/{cluster.bpc}"
        + (", kerberos" if cluster.kerberos else ""))
    sys.stdout.write(json.dumps(ready) + "\n")
    sys.stdout.flush()

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if watch_stdin:
        try:
            while sys.stdin.buffer.read(65536):
                pass
        except OSError:
            pass
        log("stdin closed: exiting")
        os._exit(0)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        os._exit(0)
