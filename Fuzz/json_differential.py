#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Differential check of AFMJSON against Python's json on which inputs are JSON.

Reads lines `valid|invalid <TAB> hex-of-input` (AFMJSON's verdicts, written by the `json` fuzz target when
AFM_FUZZ_JSON_VERDICTS names a file, or by FuzzRegressionTests) and decides each input with Python's json held to
the same reading of RFC 8259 as AFMJSON: strict UTF-8 without a byte order mark, no NaN/Infinity, no duplicate
keys (after unescaping), no lone surrogates from \\u escapes, nesting at most 64 deep. Prints every disagreement;
exits 1 if there is one.
"""
import json
import sys

MAX_DEPTH = 64


class Invalid(Exception):
    pass


def pairs(items):
    keys = [key for key, _ in items]
    if len(set(keys)) != len(keys):
        raise Invalid("duplicate key")
    return dict(items)


def constant(name):
    raise Invalid(name)


def check_string(text):
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        raise Invalid("lone surrogate")


def walk(value, depth):
    if isinstance(value, dict):
        if depth + 1 > MAX_DEPTH:
            raise Invalid("too deep")
        for key, item in value.items():
            check_string(key)
            walk(item, depth + 1)
    elif isinstance(value, list):
        if depth + 1 > MAX_DEPTH:
            raise Invalid("too deep")
        for item in value:
            walk(item, depth + 1)
    elif isinstance(value, str):
        check_string(value)


def python_valid(data):
    try:
        text = data.decode("utf-8")  # strict: overlong forms and encoded surrogates are errors
        if text.startswith("\ufeff"):
            return False
        value = json.loads(text, object_pairs_hook=pairs, parse_constant=constant, parse_int=str, parse_float=str)
        walk(value, 0)
        return True
    except (ValueError, RecursionError, Invalid):
        return False


def main():
    disagreements = 0
    total = 0
    with open(sys.argv[1], encoding="ascii") as verdicts:
        for line in verdicts:
            verdict, _, hexed = line.rstrip("\n").partition("\t")
            data = bytes.fromhex(hexed)
            total += 1
            ours = verdict == "valid"
            theirs = python_valid(data)
            if ours != theirs:
                disagreements += 1
                print(f"AFMJSON says {verdict}, Python says {'valid' if theirs else 'invalid'}: {data[:200]!r}")
    if disagreements:
        print(f"AFMJSON and Python disagree on {disagreements} of {total} inputs")
        return 1
    print(f"AFMJSON and Python agree on {total} inputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
