#!/usr/bin/env python3
"""A stock Flight SQL client against Weir's Flight SQL server: ADBC's Flight SQL driver and pyarrow.

Usage: flight_sql_client.py grpc://127.0.0.1:PORT

Runs the queries the Rust test `flight_sql.rs` expects answers to (over the tables of `tests/common`) and
prints what it saw as one JSON document on stdout. Exit 3 when adbc-driver-flightsql or pyarrow is missing.
"""

import json
import sys

try:
    import adbc_driver_flightsql.dbapi as flight_sql
    import pyarrow  # noqa: F401  (the DB-API's fetch_arrow_table needs it)
except ImportError as e:
    print(json.dumps({"missing": str(e)}))
    sys.exit(3)


def error_of(conn, sql):
    """The error a statement fails with, as type and message; None if it runs."""
    with conn.cursor() as cur:
        try:
            cur.execute(sql)
            cur.fetchall()
        except flight_sql.Error as e:
            return {"type": type(e).__name__, "message": str(e)}
    return None


def main(uri):
    out = {}
    with flight_sql.connect(uri) as conn:
        with conn.cursor() as cur:
            cur.execute('SELECT "offset", city, temp FROM "readings.clean" ORDER BY "offset"')
            table = cur.fetch_arrow_table()
            out["columns"] = table.column_names
            out["types"] = [str(t) for t in table.schema.types]
            out["rows"] = [list(row.values()) for row in table.to_pylist()]
        with conn.cursor() as cur:
            # A dotted name unquoted, and a join with a dashed one.
            cur.execute(
                'SELECT r.city, s.elevation FROM readings.clean r '
                'JOIN "weather-stations" s ON r.city = s.id ORDER BY r."offset" DESC LIMIT 1'
            )
            out["joined"] = list(cur.fetchone())
        with conn.cursor() as cur:
            cur.execute('SELECT city FROM "readings.empty"')
            out["empty"] = {"columns": [d[0] for d in cur.description], "rows": cur.fetchall()}
        out["bad_query"] = error_of(conn, "SELECT * FROM nope")
        out["bad_syntax"] = error_of(conn, "SELEC 1")
        out["read_only"] = error_of(conn, 'DROP TABLE "readings.clean"')
        out["no_data"] = error_of(conn, 'SELECT * FROM "readings.raw"')

        objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
        out["catalogs"] = [c["catalog_name"] for c in objects]
        out["tables"] = sorted(
            (s["db_schema_name"], t["table_name"])
            for c in objects
            for s in (c["catalog_db_schemas"] or [])
            for t in (s["db_schema_tables"] or [])
        )
        out["table_schema"] = conn.adbc_get_table_schema("readings.clean").names
        info = conn.adbc_get_info()
        out["vendor_name"] = info.get("vendor_name")
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
