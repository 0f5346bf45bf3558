"""One source of truth at the C/Python border: every struct, op code and flag bit Python uses is the
C headers' own, as the library describes it (dbt_layout_json). Python's dtypes and constants must be
C's description, the description must be the headers as the compiler lays them out (a probe compiled
from them), and the modules that once copied the layouts by hand must not hold one again."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dbtier.devices import native
from dbtier.measure import objects, trace
from dbtier.prediction import events

ROOT = Path(__file__).resolve().parents[2]
HEADERS = ROOT / "native" / "iotap"
LAYOUT = native.layout()

#: the fields each Python reader takes by name, and what it takes them as (numpy kind, bytes)
READS = {
    "trace_rec": {"submit_ns": "u8", "start_ns": "u8", "complete_ns": "u8", "end_ns": "u8", "offset": "u8",
                  "len": "u4", "file": "i4", "pid": "u4", "aux": "u4", "tid": "u4", "op": "u1", "dev": "u1",
                  "flags": "u1", "kind": "u1"},
    "replay_event": {"t0": "u8", "t1": "u8", "host_ns": "u8", "late_ns": "u8", "off": "u8", "len": "u8",
                     "file_size": "u8", "file": "i8", "dep": "i8", "guard": "i8", "stream": "u4", "aux": "u4",
                     "kind": "u1", "op": "u1", "dev": "u1", "flags": "u1"},
    "replay_request": {"arrival": "u8", "start": "u8", "complete": "u8", "off": "u8", "len": "u8", "file": "i8",
                       "op": "u1", "dev": "u1", "flags": "u1", "event": "u8"},
    "objio_row": {"file": "i8", "reads": "u8", "read_bytes": "u8", "writes": "u8", "write_bytes": "u8",
                  "flushes": "u8", "cached_reads": "u8", "async": "u8", "sequential": "u8", "device_ns": "u8",
                  "dev": "u4"},
    # written, not read: what a state is built from
    "device_spec": {"name": "S64", "dir": "S1024", "kind": "i4", "nparams": "u4", "params": "f384"},
    "pc_config": {"bytes": "u8", "readahead_kb": "u4", "dirty_background_pct": "u4", "dirty_pct": "u4",
                  "dsync_data": "u4"},
    "pg_path": {"cls": "u1", "space": "u1", "dsync": "u1", "space_len": "u4", "database": "i8",
                "relfilenode": "i8", "segment": "i8"},
}
#: the dtype each Python module uses for each struct
DTYPES = {"trace_rec": trace.RECORD, "replay_event": native.REPLAY_EVENT, "replay_request": native.REPLAY_REQUEST,
          "objio_row": native.OBJIO_ROW, "device_spec": native.DEVICE_SPEC, "pc_config": native.PC_CONFIG, "pg_path": native.PG_PATH}


def _fields(struct: str) -> dict[str, dict]:
    return {f["name"]: f for f in LAYOUT.doc["structs"][struct]["fields"]}


@pytest.mark.parametrize("struct", sorted(READS))
def test_python_reads_each_field_where_c_put_it(struct):
    c = _fields(struct)
    dtype = DTYPES[struct]
    assert dtype.itemsize == LAYOUT.doc["structs"][struct]["size"]
    for name, want in READS[struct].items():
        assert name in c, f"{struct}.{name}: Python reads a field C does not describe"
        f = c[name]
        assert f"{f['type']}{f['size']}" == want, f"{struct}.{name}: C has {f['type']}{f['size']}, Python reads {want}"
        got, offset = dtype.fields[name]
        assert offset == f["offset"], f"{struct}.{name}: Python reads offset {offset}, C put it at {f['offset']}"
        assert got.itemsize == f["size"] and got.base.kind == f["type"]
        assert got.itemsize // got.base.itemsize == (1 if f["type"] == "S" else f["count"])


@pytest.mark.parametrize("struct", sorted(LAYOUT.doc["structs"]))
def test_the_description_covers_the_whole_struct(struct):
    """Fields in order, each where natural alignment after the one before puts it, and the struct
    ending where its alignment ends the last: a field left out of the description would show as a
    gap no compiler leaves."""
    d = LAYOUT.doc["structs"][struct]
    at, align = 0, 1
    for f in d["fields"]:
        element = 1 if f["type"] == "S" else f["size"] // f["count"]
        at = -(-at // element) * element
        assert f["offset"] == at, f"{struct}.{f['name']} at {f['offset']}, expected {at}: a field is missing before it"
        at += f["size"]
        align = max(align, element)
    assert d["size"] == -(-at // align) * align, f"{struct}: {d['size']} bytes, the fields end at {at}"


def test_constants_are_the_libraries():
    ops, kinds = LAYOUT.enum("trace_op"), LAYOUT.enum("trace_kind")
    assert trace.OPS == {v: k for k, v in ops.items()}
    assert trace.KINDS == {v: k for k, v in kinds.items()}
    assert (trace.REQUEST, trace.CALL, trace.SYNC) == (kinds["request"], kinds["call"], kinds["sync"])
    assert (trace.WAKE, trace.SLEEP) == (LAYOUT.enum("sync_op")["wake"], LAYOUT.enum("sync_op")["sleep"])
    assert trace.SYNC_OPS == {v: k for k, v in LAYOUT.enum("sync_op").items()}
    sync = LAYOUT.flags("sync")
    assert (trace.SYNC_KILL, trace.SYNC_SEM, trace.SYNC_EPOLL) == (sync["kill"], sync["sem"], sync["epoll"])
    flags = LAYOUT.flags("trace")
    assert {**trace.FLAGS, "with_request": trace.WITH_REQUEST} == flags
    assert trace.SIZE_UNKNOWN == LAYOUT.constant("trace_size_unknown")
    assert trace.SIZE_PAGE == LAYOUT.constant("trace_size_page")
    assert trace.UNCOMMITTED == LAYOUT.constant("trace_op_uncommitted")
    assert (trace.READ, trace.WRITE, trace.FLUSH) == (ops["read"], ops["write"], ops["flush"])
    assert (objects.READ, objects.WRITE, objects.FLUSH) == (ops["read"], ops["write"], ops["flush"])
    assert (objects.PAGE_CACHE, objects.ASYNC) == (flags["page_cache"], flags["async"])
    device_ops = LAYOUT.enum("device_op")
    assert (native.OP_READ, native.OP_WRITE, native.OP_FLUSH) == (device_ops["read"], device_ops["write"],
                                                                   device_ops["flush"])
    assert set(LAYOUT.enum("device_kind")) == set(native.param_table())
    assert native.trace_format() == LAYOUT.constant("trace_format")
    assert native.chunk_bytes() == LAYOUT.constant("chunk_bytes")
    assert native.max_devices() == LAYOUT.constant("max_devices") == native.lib().dbt_max_devices()


def test_the_predictors_mark_is_a_bit_c_reserves():
    """predict marks the syncs it adds with a bit of a record's flags: C reserves it, and never
    writes it (no recorded flag shares it)."""
    assert events.CLIENT == LAYOUT.reserved("trace")["client"]
    recorded = 0
    for bit in LAYOUT.flags("trace").values():
        recorded |= bit
    assert events.CLIENT & recorded == 0 and bin(events.CLIENT).count("1") == 1


#: the C type, header and member of each described field (a nested member's path where its name is not)
C_STRUCTS = {
    "trace_rec": ("struct dbt_trace_rec", "trace.h", {}),
    "durlog_rec": ("struct dbt_durlog_rec", "durlog.h", {}),
    "replay_event": ("struct dbt_replay_event", "replay.h", {}),
    "replay_request": ("struct dbt_replay_request", "replay.h", {
        n: f"ev.{n}" for n in ("arrival", "start", "complete", "off", "len", "file", "op", "dev", "flags")}),
    "objio_row": ("struct dbt_objio_row", "objio.h", {}),
    "device_spec": ("struct dbt_device_spec", "statefile.h", {}),
    "pc_config": ("struct dbt_pc_config", "statefile.h", {}),
    "pg_path": ("struct dbt_pg_path", "pgpath.h", {}),
}


def test_the_description_is_the_headers(tmp_path):
    """An independent look at the headers: a probe compiled from them prints each described field's
    offset and size and each struct's size, and each trace flag's macro (DBT_TF_<NAME>)."""
    cc = shutil.which("cc")
    if not cc or not HEADERS.is_dir():
        pytest.skip("needs a C compiler and the source tree's headers")
    lines = ["#include <stddef.h>", "#include <stdio.h>"]
    lines += sorted({f'#include "{header}"' for _t, header, _m in C_STRUCTS.values()})
    lines.append("int main(void) {")
    expected = []
    assert set(C_STRUCTS) == set(LAYOUT.doc["structs"]), "a struct is described without its C type here"
    for struct, (ctype, _header, members) in C_STRUCTS.items():
        d = LAYOUT.doc["structs"][struct]
        lines.append(f'printf("%zu\\n", sizeof({ctype}));')
        expected.append(d["size"])
        for f in d["fields"]:
            m = members.get(f["name"], f["name"])
            lines.append(f'printf("%zu %zu\\n", offsetof({ctype}, {m}), sizeof((({ctype} *)0)->{m}));')
            expected.append((f["offset"], f["size"]))
    for name, bit in LAYOUT.flags("trace").items():
        lines.append(f'printf("%u\\n", (unsigned)DBT_TF_{name.upper()});')
        expected.append(bit)
    for name, bit in LAYOUT.flags("durlog").items():
        lines.append(f'printf("%u\\n", (unsigned)DBT_DLF_{name.upper()});')
        expected.append(bit)
    for name, code in LAYOUT.enum("durlog_kind").items():
        lines.append(f'printf("%u\\n", (unsigned)DBT_DL_{name.upper()});')
        expected.append(code)
    lines.append('printf("%u\\n", (unsigned)DBT_TF_RESERVED_CLIENT);')
    expected.append(LAYOUT.reserved("trace")["client"])
    lines.append("return 0; }")
    src = tmp_path / "probe.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "probe"
    subprocess.run([cc, "-std=c11", "-I", str(HEADERS), "-o", str(exe), str(src)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    got = [tuple(map(int, line.split())) if " " in line else int(line) for line in out if line]
    assert got == expected


#: the modules that once declared the layouts by hand
BORDER_MODULES = ["src/dbtier/measure/trace.py", "src/dbtier/measure/objects.py", "src/dbtier/prediction/events.py",
                  "src/dbtier/devices/native.py"]


@pytest.mark.parametrize("module", BORDER_MODULES)
def test_no_layout_is_declared_by_hand(module):
    text = (ROOT / module).read_text()
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())  # comments may name a bit
    assert not re.findall(r"\b0[xX][0-9a-fA-F]+", code), "a hex literal: a flag bit or constant copied from C"
    assert "np.dtype([" not in code, "a struct declared as a numpy dtype by hand"
    assert not re.findall(r'\["(?:op|kind|flags|dev)"\]\s*[!=]=\s*\d', code), "an op code or kind compared as a number"
    numbered = re.findall(r'^([A-Z_][A-Z_, ]*?)\s*=\s*\d[\d, ]*$', code, re.M)
    assert [n for n in numbered if not n.endswith("_VERSION")] == [], "a constant numbered by hand"
