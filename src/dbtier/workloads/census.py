"""Seed 001's table: the 1990 US census sample's shape (the article's 125 columns, in its order, plus
an id primary key), generated. Place of birth (pob) follows a realistic skew: the three states the
article queried have its exact shares (Florida 54,445, Puerto Rico 10,134 and Nevada 4,722 of
2,458,285 rows), the other states shares by population, and 8% foreign-born over 50 codes with a
Zipf tail. The other columns are random in their types' usual ranges."""

from __future__ import annotations

import random

from psycopg import sql

from dbtier.workloads.base import btree_bytes, heap_bytes

TABLE, PKEY, INDEX = "census", "census_pkey", "pob_idx"
SEED_ROWS = 2_458_285
QUERIED = {12: ("Florida", 54_445), 72: ("Puerto Rico", 10_134), 32: ("Nevada", 4_722)}

# The article's columns (name, type) in its order; its CREATE TABLE is the source.
_DDL = """
AAGE boolean, AANCSTR1 boolean, AANCSTR2 boolean, AAUGMENT boolean, ABIRTHPL boolean, ACITIZEN boolean,
ACLASS boolean, ADEPART boolean, ADISABL1 boolean, ADISABL2 boolean, AENGLISH boolean, AFERTIL boolean,
AGE int, AHISPAN boolean, AHOUR89 boolean, AHOURS boolean, AIMMIGR boolean, AINCOME1 int,
AINCOME2 int, AINCOME3 int, AINCOME4 int, AINCOME5 int, AINCOME6 int, AINCOME7 int, AINCOME8 int,
AINDUSTR boolean, ALABOR boolean, ALANG1 boolean, ALANG2 boolean, ALSTWRK boolean,
AMARITAL boolean, AMEANS boolean, AMIGSTAT boolean, AMOBLLIM boolean, AMOBLTY boolean,
ANCSTRY1 int, ANCSTRY2 int, AOCCUP boolean, APERCARE boolean, APOWST boolean, ARACE boolean,
ARELAT1 boolean, ARIDERS boolean, ASCHOOL boolean, ASERVPER boolean, ASEX boolean, ATRAVTME boolean,
AVAIL int, AVETS1 boolean, AWKS89 boolean, AWORK89 boolean, AYEARSCH boolean, AYRSSERV boolean,
CITIZEN int, CLASS int, DEPART int, DISABL1 int, DISABL2 int, ENGLISH int, FEB55 boolean, FERTIL int,
HISPANIC int, HOUR89 int, HOURS int, IMMIGR int, INCOME1 int, INCOME2 int, INCOME3 int, INCOME4 int,
INCOME5 int, INCOME6 int, INCOME7 int, INCOME8 int, INDUSTRY int, KOREAN boolean, LANG1 int, LANG2 int,
LOOKING int, MARITAL int, MAY75880 boolean, MEANS int, MIGPUMA int, MIGSTATE int, MILITARY int,
MOBILITY int, MOBILLIM int, OCCUP int, OTHRSERV boolean, PERSCARE int, POB int, POVERTY int, POWPUMA int,
POWSTATE int, PWGT1 int, RACE int, RAGECHLD int, REARNING int, RECTYPE text, RELAT1 int, RELAT2 int,
REMPLPAR int, RIDERS int, RLABOR int, ROWNCHLD boolean, RPINCOME int, RPOB int, RRELCHLD boolean,
RSPOUSE int, RVETSERV int, SCHOOL int, SEPT80 boolean, SERIALNO text, SEX int, SUBFAM1 int,
SUBFAM2 int, TMPABSNT int, TRAVTIME int, VIETNAM boolean, WEEK89 int, WORK89 int, WORKLWK int,
WWII boolean, YEARSCH int, YEARWRK int, YRSSERV int
"""
COLUMNS = [tuple(c.split()) for c in " ".join(_DDL.split()).split(", ")]

# 1990 resident population by state (FIPS code: millions), for the states not pinned to the article.
_STATES = {1: 4.0, 2: 0.55, 4: 3.7, 5: 2.35, 6: 29.8, 8: 3.3, 9: 3.3, 10: 0.67, 11: 0.6, 13: 6.5, 15: 1.1,
           16: 1.0, 17: 11.4, 18: 5.5, 19: 2.8, 20: 2.5, 21: 3.7, 22: 4.2, 23: 1.2, 24: 4.8, 25: 6.0, 26: 9.3,
           27: 4.4, 28: 2.6, 29: 5.1, 30: 0.8, 31: 1.6, 33: 1.1, 34: 7.7, 35: 1.5, 36: 18.0, 37: 6.6, 38: 0.64,
           39: 10.8, 40: 3.1, 41: 2.8, 42: 11.9, 44: 1.0, 45: 3.5, 46: 0.7, 47: 4.9, 48: 17.0, 49: 1.7,
           50: 0.56, 51: 6.2, 53: 4.9, 54: 1.8, 55: 4.9, 56: 0.45}
FOREIGN = 0.08
_SLOTS = 100_000  # pob is drawn from an array of this many codes: shares to 0.001%


def pob_shares() -> dict[int, float]:
    shares = {code: n / SEED_ROWS for code, (_, n) in QUERIED.items()}
    foreign = {100 + 9 * k: 1 / (k + 1) for k in range(50)}
    f_total = sum(foreign.values())
    shares.update({code: FOREIGN * w / f_total for code, w in foreign.items()})
    rest = 1 - sum(shares.values())
    s_total = sum(_STATES.values())
    shares.update({code: rest * w / s_total for code, w in _STATES.items()})
    return shares


def pob_slots() -> list[int]:
    """The codes laid out in _SLOTS slots by share (largest remainders keep the total exact)."""
    shares = pob_shares()
    exact = {c: s * _SLOTS for c, s in shares.items()}
    counts = {c: int(v) for c, v in exact.items()}
    for c in sorted(exact, key=lambda c: exact[c] - counts[c], reverse=True)[:_SLOTS - sum(counts.values())]:
        counts[c] += 1
    return [c for c, n in sorted(counts.items()) for _ in range(n)]


def _value(name: str, kind: str) -> str:
    if name == "POB":
        return "(%(slots)s::int[])[1 + floor(random() * %(n)s)::int]"
    if kind == "boolean":
        return "random() < 0.15"
    if kind == "text":
        return "upper(substr(md5(random()::text), 1, 7))" if name == "SERIALNO" else "'P'"
    if name == "AGE":
        return "floor(random() * 91)::int"
    if name.startswith("INCOME") or name in ("RPINCOME", "REARNING"):
        return "floor(random() * random() * 100000)::int"
    return "floor(random() * 100)::int"


def sizes(rows: int) -> dict[str, int]:
    """census at 19 rows a page (measured: 120 columns, most of them 4-byte integers and booleans, about
    420 bytes a row with its header and padding), its primary key and pob_idx (an int4 key each)."""
    return {TABLE: heap_bytes(rows, 420), PKEY: btree_bytes(rows, 4), INDEX: btree_bytes(rows, 4)}


def create(lab, conn, rows: int, seed: int, progress, batch: int = 20_000) -> None:
    """The table on its placed device, loaded in physical order of the generated rows, with its
    primary key (no pob index: the workload builds that where it is placed)."""
    cols = ", ".join(f"{n} {t}" for n, t in COLUMNS)
    conn.execute(sql.SQL(f"CREATE TABLE census ({cols}, id serial, CONSTRAINT census_pkey PRIMARY KEY (id) "
                         "USING INDEX {}) {}").format(lab.tablespace(PKEY, "index"), lab.tablespace(TABLE, "table")))
    conn.execute("SELECT setseed(%s)", (((seed % 2000) - 1000) / 1000.0,))
    values = ", ".join(_value(n, t) for n, t in COLUMNS)
    insert = (f"INSERT INTO census ({', '.join(n for n, _ in COLUMNS)}) SELECT {values} "
              "FROM generate_series(1, %(count)s)")
    slots = pob_slots()
    random.Random(seed).shuffle(slots)
    progress.phase(f"loading census ({rows:,} rows of 120 columns)", total=rows)
    for lo in range(0, rows, batch):
        count = min(batch, rows - lo)
        conn.execute(insert, {"slots": slots, "n": len(slots), "count": count})
        progress.advance(count)
