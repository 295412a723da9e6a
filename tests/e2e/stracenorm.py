"""Normalize `strace -f -yy` output of a simulated download client into the
sequence of file and network operations a golden file holds.

Kept: operations on paths under ROOT (open with its access/create flags,
write (runs collapsed), pwrite (offset), rename, unlink, mkdir, symlink,
chmod, flock with its result, copies), and connects (by server name: hub, cas,
modelscope, mirror, dns). Dropped: everything else (imports, libraries, /etc,
reads, closes, polls). Runs of operations of threads other than the first one
(download workers) are order-free: each run becomes its sorted set. uuid-like
names become <uuid>. filelock's polling (open, flock EAGAIN, again) is kept
as one attempt.

Golden files: `# ...` lines are comments (sources); an operation line may end
with `  # source` too; blank lines are ignored.
"""
import re

ADDR = {"127.0.0.2": "hub", "127.0.0.3": "cas", "127.0.0.4": "modelscope",
        "127.0.0.5": "mirror", "127.0.0.1": "local"}
LINE = re.compile(r"^(?:\[pid\s+)?(\d+)\]?\s+(\w+)\((.*)\)\s+=\s+(-?\d+|\?)\s*(\w+)?")
STR = re.compile(r'"((?:[^"\\]|\\.)*)"')
FDPATH = re.compile(r"^(\d+)<([^>]*)>")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\.[0-9a-f]{8}\.tmp$")
KEEP_FLAGS = ("O_RDONLY", "O_WRONLY", "O_RDWR", "O_CREAT", "O_EXCL", "O_TRUNC", "O_APPEND")


def _rel(path, root):
    if not path.startswith(root + "/") and path != root:
        return None
    return UUID.sub("<uuid>", "ROOT" + path[len(root):])


def _flags(arg):
    return "|".join(f for f in arg.split("|") if f in KEEP_FLAGS) or "O_RDONLY"


def _resolve(path, cwd):
    return path if path.startswith("/") else cwd.rstrip("/") + "/" + path


def normalize(text, root, cwd=None):
    cwd = cwd or root
    ops = []  # (pid, op)
    pending = {}  # pid -> the first half of an "<unfinished ...>" call
    lines = []
    for raw in text.splitlines():
        m = re.match(r"^(?:\[pid\s+)?(\d+)\]?\s+(.*)$", raw)
        if not m:
            continue
        pid, rest = m.groups()
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[:-len("<unfinished ...>")].rstrip()
            continue
        r = re.match(r"^<\.\.\. \w+ resumed>(.*)$", rest)
        if r:
            if pid not in pending:
                continue
            rest = pending.pop(pid) + r.group(1)
        lines.append(f"{pid} {rest}")
    for raw in lines:
        m = LINE.match(raw)
        if not m:
            continue
        pid, call, args, ret, err = m.groups()
        ok = ret not in ("-1", "?")
        strs = STR.findall(args)
        fd = FDPATH.match(args)
        op = None
        if call in ("open", "openat", "creat") and strs and ok:
            if "O_DIRECTORY" in args:
                continue
            r = _rel(_resolve(strs[0], cwd), root)
            flags = args.split(",")[2].strip() if call == "openat" else args.split(",")[1].strip()
            if r:
                op = f"open {r} {_flags(flags)}"
        elif call in ("rename", "renameat", "renameat2") and len(strs) >= 2 and ok:
            a, b = (_rel(_resolve(s, cwd), root) for s in strs[:2])
            if b:
                op = f"rename {a or 'OUTSIDE'} -> {b}"
        elif call in ("unlink", "unlinkat") and strs and ok:
            r = _rel(_resolve(strs[0], cwd), root)
            if r:
                op = f"unlink {r}"
        elif call in ("mkdir", "mkdirat") and strs and ok:
            r = _rel(_resolve(strs[0], cwd), root)
            if r:
                op = f"mkdir {r}"
        elif call in ("symlink", "symlinkat") and len(strs) >= 2 and ok:
            r = _rel(_resolve(strs[-1], cwd), root)
            if r:
                op = f"symlink {r} -> {strs[0]}"
        elif call in ("chmod", "fchmodat") and strs and ok:
            r = _rel(_resolve(strs[0], cwd), root)
            if r:
                op = f"chmod {r}"
        elif call == "flock" and fd:
            r = _rel(fd.group(2), root)
            mode = args.split(",")[1].strip()
            if r:
                op = f"flock {r} {mode} {'ok' if ok else err}"
        elif call in ("pwrite64", "pwrite") and fd and ok:
            r = _rel(fd.group(2), root)
            if r:
                op = f"pwrite {r} @{args.rsplit(',', 1)[1].strip()}"
        elif call in ("write", "writev") and fd and ok:
            r = _rel(fd.group(2), root)
            if r:
                op = f"write {r}"
        elif call in ("sendfile", "sendfile64", "copy_file_range") and ok:
            paths = re.findall(r"\d+<([^>]*)>", args)
            rels = [_rel(p, root) for p in paths]
            if len(rels) >= 2 and all(rels):
                op = f"copy {rels[1]} -> {rels[0]}" if call.startswith("sendfile") \
                    else f"copy {rels[0]} -> {rels[1]}"
        elif call == "connect" and "AF_INET" in args:
            port = re.search(r"htons\((\d+)\)", args)
            addr = re.search(r'inet_addr\("([\d.]+)"\)', args)
            if port and addr:
                name = ADDR.get(addr.group(1), addr.group(1))
                if port.group(1) == "53":
                    name, p = "dns", ""
                else:
                    p = ":" + port.group(1)
                res = "" if ok or err == "EINPROGRESS" else f" {err}"
                op = f"connect {name}{p}{res}"
        if op:
            ops.append((pid, op))
    if not ops:
        return []
    main = ops[0][0]
    out, run = [], []

    def flush():
        if run:
            out.extend(sorted(set(run)))
            run.clear()
    for pid, op in ops:
        if pid == main:
            flush()
            if not out or out[-1] != op or not op.startswith(("write ", "connect dns")):
                out.append(op)
        else:
            run.append(op)
    flush()
    # collapse consecutive duplicate writes and DNS connects
    final = []
    for op in out:
        if final and final[-1] == op and op.startswith(("write ", "connect dns")):
            continue
        final.append(op)
    # filelock's polling: a repeated (open, flock EAGAIN) pair is kept once
    polled = []
    for op in final:
        polled.append(op)
        if len(polled) >= 4 and polled[-1].endswith("EAGAIN") and polled[-2:] == polled[-4:-2]:
            del polled[-2:]
    return polled


def read_golden(path):
    lines = []
    with open(path) as f:
        for line in f:
            line = line.split("  #", 1)[0].rstrip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines
