"""Which `table.column` each $n of a normalised statement is compared with or stored into, read from
its parse tree: `WHERE c.customer_id = $1` with `customer c` in FROM gives customer.customer_id,
`INSERT INTO t (a, b) VALUES ($1, $2)` gives t.a and t.b, `UPDATE t SET v = $1` t.v. A replay of a
capture built from statistics draws $n's values from that column. None where the tree does not tell
(LIMIT $1, an expression, an unqualified column among several tables): no catalog is read."""

from __future__ import annotations

import json

from pglast import parser as pg


def _walk(node):
    """Every dict in the tree, depth first."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            yield n
            stack.extend(n.values())
        elif isinstance(n, list):
            stack.extend(n)


def _params(node) -> list[int]:
    """$n directly in `node` (a ParamRef, a cast of one, or a list of them)."""
    if not isinstance(node, dict):
        return []
    if "ParamRef" in node:
        return [node["ParamRef"]["number"]]
    if "TypeCast" in node:
        return _params(node["TypeCast"].get("arg"))
    if "List" in node:
        return [n for item in node["List"].get("items", []) for n in _params(item)]
    return []


def _column(node) -> list[str] | None:
    if isinstance(node, dict) and "TypeCast" in node:
        node = node["TypeCast"].get("arg")
    if not isinstance(node, dict) or "ColumnRef" not in node:
        return None
    fields = [f["String"]["sval"] for f in node["ColumnRef"].get("fields", []) if "String" in f]
    return fields or None


_COMPARISONS = {"=", "<>", "!=", "<", ">", "<=", ">=", "~~", "!~~", "~~*", "!~~*"}


def _is_comparison(e: dict) -> bool:
    """A comparison (=, <, IN, BETWEEN, LIKE), not arithmetic: `abalance + $1` tells no column of $1."""
    if e.get("kind") in ("AEXPR_IN", "AEXPR_BETWEEN", "AEXPR_NOT_BETWEEN", "AEXPR_LIKE", "AEXPR_ILIKE",
                         "AEXPR_OP_ANY", "AEXPR_OP_ALL", "AEXPR_DISTINCT", "AEXPR_NOT_DISTINCT"):
        return True
    names = [x.get("String", {}).get("sval") for x in e.get("name", [])]
    return bool(names) and names[-1] in _COMPARISONS


def param_sources(text: str) -> list[str | None] | None:
    """$1..$n's sources (None for one that cannot be told); None if the text does not parse."""
    try:
        tree = json.loads(pg.parse_sql_json(text))
    except pg.ParseError:
        return None
    tables: dict[str, str] = {}   # alias or name -> table
    names: set[str] = set()
    highest = 0
    found: dict[int, str] = {}
    for n in _walk(tree):
        rv = n.get("RangeVar")
        for kind in ("UpdateStmt", "InsertStmt", "DeleteStmt"):   # their target is a bare relation
            if kind in n:
                rv = n[kind].get("relation")
        if rv and "relname" in rv:
            names.add(rv["relname"])
            tables[rv["relname"]] = rv["relname"]
            alias = rv.get("alias", {}).get("aliasname")
            if alias:
                tables[alias] = rv["relname"]
        if "ParamRef" in n:
            highest = max(highest, n["ParamRef"].get("number", 0))
    only = next(iter(names)) if len(names) == 1 else None

    def resolve(fields: list[str] | None) -> str | None:
        if not fields:
            return None
        if len(fields) >= 2:
            table = tables.get(fields[-2])
            return f"{table}.{fields[-1]}" if table else None
        return f"{only}.{fields[0]}" if only else None

    for n in _walk(tree):
        if "A_Expr" in n and _is_comparison(n["A_Expr"]):
            e = n["A_Expr"]
            for col_side, param_side in (("lexpr", "rexpr"), ("rexpr", "lexpr")):
                source = resolve(_column(e.get(col_side)))
                if source:
                    for p in _params(e.get(param_side)):
                        found.setdefault(p, source)
        elif "InsertStmt" in n:
            ins = n["InsertStmt"]
            table = ins["relation"]["relname"]
            cols = [c["ResTarget"].get("name") for c in ins.get("cols", [])]
            select = ins.get("selectStmt", {}).get("SelectStmt", {})
            for row in select.get("valuesLists", []):
                for col, item in zip(cols, row.get("List", {}).get("items", [])):
                    for p in _params(item):
                        found.setdefault(p, f"{table}.{col}")
        elif "UpdateStmt" in n:
            upd = n["UpdateStmt"]
            table = upd["relation"]["relname"]
            for target in upd.get("targetList", []):
                rt = target.get("ResTarget", {})
                for p in _params(rt.get("val")):
                    found.setdefault(p, f"{table}.{rt.get('name')}")
    return [found.get(i) for i in range(1, highest + 1)]


#: statements a synthetic mix replays; the rest (BEGIN, SET, DDL, VACUUM ...) are utility statements
_REPLAYED = ("SelectStmt", "InsertStmt", "UpdateStmt", "DeleteStmt", "MergeStmt")


def is_utility(text: str) -> bool | None:
    """True for a utility statement, None if the text does not parse."""
    try:
        tree = json.loads(pg.parse_sql_json(text))
    except pg.ParseError:
        return None
    stmts = tree.get("stmts", [])
    return not stmts or any(next(iter(s.get("stmt", {"?": 0}))) not in _REPLAYED for s in stmts)
