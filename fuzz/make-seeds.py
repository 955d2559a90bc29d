#!/usr/bin/env python3
"""Writes the generated part of the seed corpora (fuzz/corpus/<target>/): small
real-format inputs built here (archives, token files, keytabs, manifests,
multipart uploads), and copies of real files from this machine's Debian
packages (POMs from /usr/share/maven-repo) when present. Run from the repo root:
    python3 fuzz/make-seeds.py
Idempotent; the files it writes are committed."""
import gzip, io, json, os, struct, tarfile, zipfile, glob, hashlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

def tar_bytes(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name, kind, payload in entries:
            info = tarfile.TarInfo(name)
            info.mtime = 1700000000
            if kind == "file":
                info.size = len(payload); info.mode = 0o644
                t.addfile(info, io.BytesIO(payload))
            elif kind == "dir":
                info.type = tarfile.DIRTYPE; info.mode = 0o755
                t.addfile(info)
            elif kind == "sym":
                info.type = tarfile.SYMTYPE; info.linkname = payload
                t.addfile(info)
            elif kind == "hard":
                info.type = tarfile.LNKTYPE; info.linkname = payload
                t.addfile(info)
    return buf.getvalue()

def gz(data):
    return gzip.compress(data, mtime=0)

def zip_bytes(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, payload in entries:
            z.writestr(name, payload)
    return buf.getvalue()

# archive: first byte 0 tar, 1 tar gzipped by the harness, 2 raw gzip, 3 zip.
good = [("conf/", "dir", b""), ("conf/app.properties", "file", b"a=1\n"),
        ("lib/x.jar", "file", b"PK\x05\x06" + b"\0" * 18), ("link", "sym", "conf/app.properties"),
        ("hard", "hard", "conf/app.properties")]
put("archive", "tar-good", b"\0" + tar_bytes(good))
put("archive", "tar-for-gzip", b"\1" + tar_bytes(good))
put("archive", "tgz-good", b"\2" + gz(tar_bytes(good)))
put("archive", "zip-good", b"\3" + zip_bytes([("a/b.txt", b"hello"), ("c.txt", b"x" * 100)]))
put("archive", "tar-climbs", b"\0" + tar_bytes([("../evil", "file", b"x")]))
put("archive", "tar-symlink-out", b"\0" + tar_bytes([("l", "sym", "../../etc"), ("l/passwd", "file", b"x")]))
put("archive", "tar-dup", b"\1" + tar_bytes([("a", "file", b"1"), ("a", "file", b"2")]))
put("archive", "zip-climbs", b"\3" + zip_bytes([("../../x", b"y")]))
put("archive", "tgz-bomb", b"\2" + gz(tar_bytes([("big", "file", b"\0" * 300000)])))
# A tar split into gzip members (as cat a.gz b.gz, BGZF); garbage after the last
# member; a header declaring more than the fuzz limit (1 MiB); a name component
# longer than the file system takes.
two = tar_bytes(good)
put("archive", "tgz-members", b"\2" + gz(two[:1024]) + gz(b"") + gz(two[1024:]))
put("archive", "tgz-garbage-after", b"\2" + gz(two) + b"\0" * 512 + b"junk")
big = tarfile.TarInfo("big"); big.size = 1 << 30; big.mtime = 1700000000
put("archive", "tar-declares-too-much", b"\0" + big.tobuf(tarfile.GNU_FORMAT) + b"\0" * 4096)
put("archive", "tar-long-component", b"\0" + tar_bytes([("d/" + "n" * 300, "file", b"x")]))

# upload: a multipart body as `stage upload` sends it (boundary of src/fuzz/upload.rs).
B = b"sparklocalizerfuzz"
def multipart(parts):
    out = b""
    for name, ctype, payload in parts:
        out += b"--" + B + b"\r\nContent-Disposition: form-data; name=\"" + name.encode() + b"\""
        if name == "resources":
            out += b"; filename=\"bundle.tar.gz\""
        out += b"\r\nContent-Type: " + ctype.encode() + b"\r\n\r\n" + payload + b"\r\n"
    return out + b"--" + B + b"--\r\n"
owner = json.dumps({"namespace": "spark", "ownerType": "Pod", "ownerName": "driver",
                    "ownerLabels": {"spark-app-selector": "spark-1"}}).encode()
bundle = gz(tar_bytes([("app.jar", "file", b"PK\x05\x06" + b"\0" * 18), ("conf.txt", "file", b"x=1\n")]))
put("upload", "good", multipart([("resourcesOwner", "application/json", owner), ("resources", "application/octet-stream", bundle)]))
put("upload", "bundle-first", multipart([("resources", "application/octet-stream", bundle), ("resourcesOwner", "text/plain", owner)]))
put("upload", "not-gzip", multipart([("resourcesOwner", "application/json", owner), ("resources", "application/octet-stream", b"PK\x03\x04")]))
put("upload", "nested", multipart([("resourcesOwner", "application/json", owner), ("resources", "application/octet-stream", gz(tar_bytes([("d/", "dir", b""), ("d/x", "file", b"1")])))]))
put("upload", "repeated", multipart([("resourcesOwner", "application/json", owner), ("resourcesOwner", "application/json", owner)]))

# hadoop_token: Writable (0) and protobuf (1) token files.
def vlong(v):
    if -112 <= v <= 127:
        return struct.pack("b", v)
    neg = v < 0
    x = ~v if neg else v
    b = x.to_bytes(8, "big").lstrip(b"\0")
    first = (-120 - len(b)) if neg else (-112 - len(b))
    return struct.pack("b", first) + b
def text(s):
    s = s.encode() if isinstance(s, str) else s
    return vlong(len(s)) + s
ident = b"\0" + text("spark") + text("yarn") + text("") + b"".join(vlong(v) for v in (1700000000000, 4100000000000, 7, 3))
proxy = b"\0" + text("alice") + text("yarn") + text("spark") + b"".join(vlong(v) for v in (1, 2, 3, 4))
def writable(tokens, secrets):
    out = b"HDTS\0" + vlong(len(tokens))
    for alias, ident_, pw, kind, service in tokens:
        out += text(alias) + vlong(len(ident_)) + ident_ + vlong(len(pw)) + pw + text(kind) + text(service)
    out += vlong(len(secrets))
    for alias, key in secrets:
        out += text(alias) + vlong(len(key)) + key
    return out
def varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7f) | 0x80]); v >>= 7
    return out + bytes([v])
def field(n, value):
    return varint(n << 3 | 2) + varint(len(value)) + value
def proto(tokens, secrets):
    msg = b""
    for alias, ident_, pw, kind, service in tokens:
        tok = field(1, ident_) + field(2, pw) + field(3, kind.encode()) + field(4, service.encode())
        msg += field(1, field(1, alias.encode()) + field(2, tok))
    for alias, key in secrets:
        msg += field(2, field(1, alias.encode()) + field(3, key))
    return b"HDTS\1" + varint(len(msg)) + msg
hdfs = ("ha-hdfs:ns1", ident, b"PASSWORD", "HDFS_DELEGATION_TOKEN", "ha-hdfs:ns1")
other = ("kms", b"\x01\x02", b"pw", "kms-dt", "127.0.0.1:9600")
prox = ("nn", proxy, b"pw", "HDFS_DELEGATION_TOKEN", "10.0.0.1:8020")
put("hadoop_token", "writable-one", writable([hdfs], []))
put("hadoop_token", "writable-many", writable([hdfs, other, prox], [("key", b"SECRET")]))
put("hadoop_token", "proto-one", proto([hdfs], []))
put("hadoop_token", "proto-many", proto([hdfs, other, prox], [("key", b"SECRET")]))

# kerberos_files: a keytab (0x0502, two principals) and ticket caches (0x0504, 0x0503).
def kt_entry(principal, kvno=2):
    name, realm = principal.split("@")
    comps = name.split("/")
    e = struct.pack(">HH", len(comps), len(realm)) + realm.encode()
    for c in comps:
        e += struct.pack(">H", len(c)) + c.encode()
    e += struct.pack(">IIBHH", 1, 1700000000, kvno, 18, 32) + b"\7" * 32
    return struct.pack(">i", len(e)) + e
put("kerberos_files", "keytab", b"\5\2" + kt_entry("spark/driver.ns.svc@EXAMPLE.COM") + kt_entry("alice@EXAMPLE.COM"))
put("kerberos_files", "keytab-hole", b"\5\2" + struct.pack(">i", -12) + b"\0" * 12 + kt_entry("alice@EXAMPLE.COM"))
def ccache(version, principal):
    name, realm = principal.split("@")
    comps = name.split("/")
    out = struct.pack(">H", version)
    if version == 0x0504:
        tag = struct.pack(">HHii", 1, 8, 0, 0)
        out += struct.pack(">H", len(tag)) + tag
    out += struct.pack(">II", 1, len(comps)) + struct.pack(">I", len(realm)) + realm.encode()
    for c in comps:
        out += struct.pack(">I", len(c)) + c.encode()
    return out + b"\0" * 40
put("kerberos_files", "ccache-4", ccache(0x0504, "alice@EXAMPLE.COM"))
put("kerberos_files", "ccache-3", ccache(0x0503, "hdfs/nn.example.com@EXAMPLE.COM"))

# hadoop_conf: site files as clusters write them.
put("hadoop_conf", "core-site.xml", """<?xml version="1.0" encoding="UTF-8"?>
<?xml-stylesheet type="text/xsl" href="configuration.xsl"?>
<!-- Licensed under the Apache License -->
<configuration>
  <property>
    <name>fs.defaultFS</name>
    <value>hdfs://ns1</value>
    <description>The default file system.</description>
  </property>
  <property><name>hadoop.security.authentication</name><value>kerberos</value><final>true</final></property>
  <property><name>hadoop.rpc.protection</name><value> privacy </value></property>
</configuration>
""")
put("hadoop_conf", "hdfs-site.xml", """<?xml version="1.0"?>
<configuration>
<property><name>dfs.nameservices</name><value>ns1</value></property>
<property><name>dfs.ha.namenodes.ns1</name><value>nn1,nn2</value></property>
<property><name>dfs.namenode.rpc-address.ns1.nn1</name><value>nn1.example.com:8020</value></property>
<property><name>dfs.namenode.rpc-address.ns1.nn2</name><value>nn2.example.com:8020</value></property>
<property><name>dfs.client.failover.proxy.provider.ns1</name><value>org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider</value></property>
<property><name>a&amp;b</name><value><![CDATA[x<y]]>&#10;z<!-- c -->w</value></property>
</configuration>
""")

# hdfs_warning: lines as hdfs-native logs a failed replica.
put("hdfs_warning", "connect", 'Failed to read block from DatanodeIdProto { ip_addr: "10.0.0.7", hostname: "dn1", datanode_uuid: "u", xfer_port: 9866, info_port: 9864, ipc_port: 9867, info_secure_port: None }: Io(Os { code: 111, kind: ConnectionRefused, message: "Connection refused" })')
put("hdfs_warning", "checksum", 'Checksum failed for block from DatanodeIdProto { ip_addr: "127.0.0.1", xfer_port: 50010 }: ChecksumError')

# retry_after
for i, v in enumerate(["120", "0", " 5 ", "Wed, 21 Oct 2026 07:28:00 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "+5", "-1", "1.5"]):
    put("retry_after", f"value-{i}", v)

# www_authenticate
for i, v in enumerate(['Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/ubuntu:pull"',
                       'Basic realm="Registry Realm"', 'bearer realm=https://r.example/t, service=r.example',
                       'Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull,push"',
                       'Negotiate', 'Bearer service="x"']):
    put("www_authenticate", f"value-{i}", v)

# oci_reference
D = "sha256:" + hashlib.sha256(b"x").hexdigest()
for i, v in enumerate(["oci://ghcr.io/apache/celeborn-client:0.5.1", f"oci://127.0.0.1:5000/jars/app@{D}#app.jar",
                       "oci://docker.io/busybox", f"oci://reg.example/a/b/c:v1@{D}", "oci://[::1]:5000/x:y#a%20b.jar",
                       "OCI://Registry.Example/x", "oci://user:pw@reg/x"]):
    put("oci_reference", f"ref-{i}", v)

# oci_manifest: first byte picks the content type (0 none, 1 OCI manifest, 2 Docker, 3 OCI index, 4 Docker list).
layer = {"mediaType": "application/java-archive", "digest": D, "size": 1234,
         "annotations": {"org.opencontainers.image.title": "app.jar"}}
image = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
         "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": D, "size": 2}, "layers": [layer]}
index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
         "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": D, "size": 500,
                        "platform": {"os": "linux", "architecture": a}} for a in ("amd64", "arm64")]}
put("oci_manifest", "image", b"\0" + json.dumps(image).encode())
put("oci_manifest", "index", b"\3" + json.dumps(index).encode())
put("oci_manifest", "artifact", b"\0" + json.dumps({"mediaType": "application/vnd.oci.artifact.manifest.v1+json", "blobs": [layer]}).encode())
put("oci_manifest", "docker-list", b"\4" + json.dumps({"schemaVersion": 2, "manifests": index["manifests"]}).encode())

# maven_coord
for i, v in enumerate(["org.apache.celeborn:celeborn-client-spark-3-shaded_2.12:0.5.1", "com.google.guava/guava/33.0.0-jre",
                       "org.apache.spark:spark-avro_2.12:3.5.3:tests", "com.google.guava:guava", "*:slf4j-*", "a:b:c:d:e"]):
    put("maven_coord", f"coord-{i}", v)

# maven_version: a requirement, then versions, one per line.
for i, v in enumerate(["[1.0,2.0)\n1.0\n1.5-SNAPSHOT\n2.0\n1.10\n1.9.9-rc1",
                       "(,1.0],[1.2,)\n0.9\n1.1\n1.2\n1.2.0.Final\n1-beta",
                       "[3.5.3]\n3.5.3\n3.5.3-SNAPSHOT\n3.5.03",
                       "1.0\n1.0-alpha-1\n1.0-a1\n1.0.0\nv1.0\n1.0-sp1"]):
    put("maven_version", f"req-{i}", v)

# maven_metadata
put("maven_metadata", "versions", """<?xml version="1.0" encoding="UTF-8"?>
<metadata><groupId>org.example</groupId><artifactId>a</artifactId>
<versioning><latest>2.0</latest><release>2.0</release>
<versions><version>1.0</version><version>1.1</version><version>2.0</version></versions>
<lastUpdated>20240102030405</lastUpdated></versioning></metadata>
""")
put("maven_metadata", "snapshot-m3", """<metadata modelVersion="1.1.0"><groupId>org.example</groupId><artifactId>a</artifactId><version>1.0-SNAPSHOT</version>
<versioning><snapshot><timestamp>20240102.030405</timestamp><buildNumber>7</buildNumber></snapshot>
<snapshotVersions>
<snapshotVersion><extension>jar</extension><value>1.0-20240102.030405-7</value><updated>20240102030405</updated></snapshotVersion>
<snapshotVersion><classifier>sources</classifier><extension>jar</extension><value>1.0-20240102.030405-7</value></snapshotVersion>
<snapshotVersion><extension>pom</extension><value>1.0-20240102.030405-7</value></snapshotVersion>
</snapshotVersions></versioning></metadata>
""")

# pom: real POMs of Debian's Maven repository (small ones), and interpolation cases.
poms = sorted(glob.glob("/usr/share/maven-repo/**/*.pom", recursive=True))
small = [p for p in poms if os.path.getsize(p) < 6000 and not os.path.islink(p)][:12]
for p in small:
    put("pom", "debian-" + os.path.basename(p), open(p, "rb").read())
put("pom", "interpolation", """<project><modelVersion>4.0.0</modelVersion><groupId>g</groupId><artifactId>a</artifactId><version>1</version>
<properties><x>${y}${y}</x><y>${z}${z}</y><z>v</z><self>${self}</self></properties>
<dependencies><dependency><groupId>${project.groupId}</groupId><artifactId>b-${x}</artifactId><version>${y}</version></dependency>
<dependency><groupId>g</groupId><artifactId>${self}</artifactId><version>1</version></dependency></dependencies></project>
""")

# secret_files: a token file, a kubeconfig, a resource secret.
put("secret_files", "token", "# upload token\n\n  eyJhbGciOiJSUzI1NiJ9.e30.sig  \n")
put("secret_files", "kubeconfig", """apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: c, user: alice, namespace: spark}
- name: prod
  context: {cluster: c, user: eks}
users:
- name: alice
  user: {token: abc.def}
- name: eks
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
      args: [eks, get-token, --cluster-name, c]
      env: [{name: AWS_PROFILE, value: p}]
- name: files
  user: {tokenFile: ./token}
""")
put("secret_files", "kubeconfig-prod", "prod\n" + open(os.path.join(ROOT, "secret_files", "kubeconfig")).read().split("\n", 0)[0])
put("secret_files", "secret", "6c0e2f3a-5b1d-4f63-9a7e-0c8d1e2f3a4b\n")
