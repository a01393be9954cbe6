#!/usr/bin/env python3
"""The Flight SQL clients kamu documents for `kamu sql server`, run the way kamu's examples run them
(kamu-cli's examples/flight-sql/python/): ADBC's Flight SQL driver with pandas, flightsql-dbapi, and
SQLAlchemy through flightsql-dbapi's `datafusion+flightsql` dialect.

Usage:
  flight_sql_clients.py adbc URI [--user U --password P | --token T] [--tls-root FILE]
  flight_sql_clients.py dbapi HOST PORT [--user U --password P | --token T]
  flight_sql_clients.py sqlalchemy HOST PORT [--user U --password P | --token T]
  flight_sql_clients.py live URI SQL [--user U --password P | --token T]

Each mode prints one JSON document on stdout with what the client saw; a failure to connect or to run
the first statement is reported as {"error": {"type", "message"}} (exit 0), so the caller can check
refusals. `live` answers each line on standard input with one JSON line: the result of SQL run by a new
cursor and by one cursor that keeps re-executing the same (prepared) statement. Exit 3 when a client
package is missing.
"""

import argparse
import json
import sys
import warnings

warnings.simplefilter("ignore")  # pandas warns about DB-API connections other than SQLAlchemy's

try:
    import adbc_driver_flightsql
    import adbc_driver_flightsql.dbapi
    import adbc_driver_manager
    import pandas
    import pyarrow  # noqa: F401
except ImportError as e:
    print(json.dumps({"missing": str(e)}))
    sys.exit(3)

# What every client runs: kamu's examples' statements over the test tables.
READINGS = 'select "offset", city, temp from "readings.clean" order by "offset" limit 10'
BY_CITY = 'SELECT "offset", city FROM "readings.clean" WHERE city = ? ORDER BY "offset"'


def error(e):
    return {"error": {"type": type(e).__name__, "message": str(e)}}


def records(df):
    return json.loads(df.to_json(orient="records"))


def adbc_connect(args):
    db_kwargs = {}
    if args.user is not None:
        # Anonymous users authenticate with basic auth and get a session token, as in kamu's example.
        db_kwargs[adbc_driver_manager.DatabaseOptions.USERNAME.value] = args.user
        db_kwargs[adbc_driver_manager.DatabaseOptions.PASSWORD.value] = args.password
    if args.token is not None:
        db_kwargs[adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value] = f"Bearer {args.token}"
    if args.tls_root is not None:
        with open(args.tls_root) as f:
            db_kwargs[adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value] = f.read()
    return adbc_driver_flightsql.dbapi.connect(args.target, db_kwargs=db_kwargs, autocommit=True)


def run_adbc(args):
    out = {}
    try:
        con = adbc_connect(args)
        df = pandas.read_sql("select 1", con)
    except Exception as e:  # noqa: BLE001 (what a refused login raises is the driver's business)
        return error(e)
    with con:
        out["select1"] = records(df)
        out["show_tables"] = records(pandas.read_sql("show tables", con))
        out["rows"] = records(pandas.read_sql(READINGS, con))
        # pandas' read_sql does not pass parameters to ADBC connections; the DB-API cursor does.
        with con.cursor() as cur:
            out["param_schema"] = [
                [f.name, str(f.type)] for f in (cur.adbc_prepare(BY_CITY) or [])
            ]
            cur.execute(BY_CITY, parameters=("Lima",))
            out["params"] = [list(r) for r in cur.fetchall()]
            cur.execute(BY_CITY, parameters=("Oslo",))
            out["params_again"] = [list(r) for r in cur.fetchall()]
        with con.cursor() as cur:
            try:
                cur.execute(BY_CITY)
                cur.fetchall()
                out["unbound"] = None
            except adbc_driver_flightsql.dbapi.Error as e:
                out["unbound"] = error(e)["error"]
    return out


def dbapi_client(args):
    from flightsql import FlightSQLClient

    kwargs = {"host": args.target, "port": int(args.port), "insecure": True}
    if args.user is not None:
        kwargs.update(user=args.user, password=args.password)
    if args.token is not None:
        kwargs.update(token=args.token)
    return FlightSQLClient(**kwargs)


def run_dbapi(args):
    from flightsql import connect

    out = {}
    try:
        con = connect(dbapi_client(args))
        cursor = con.cursor()
        cursor.execute("select 1 as value")
    except Exception as e:  # noqa: BLE001
        return error(e)
    out["select1"] = {"columns": [d[0] for d in cursor.description], "rows": [list(r) for r in cursor]}
    cursor.execute("show tables")
    out["show_tables"] = [list(r) for r in cursor]
    out["rows"] = records(pandas.read_sql(READINGS, con))
    out["params"] = records(pandas.read_sql(BY_CITY, con, params=["Lima"]))
    return out


def run_sqlalchemy(args):
    import flightsql.sqlalchemy  # noqa: F401  (registers the dialect)
    import sqlalchemy

    host = f"{args.target}:{args.port}"
    if args.user is not None:
        url = f"datafusion+flightsql://{args.user}:{args.password}@{host}?insecure=True"
    else:
        url = f"datafusion+flightsql://{host}?insecure=True"
        if args.token is not None:
            url += f"&token={args.token}"
    out = {}
    try:
        engine = sqlalchemy.create_engine(url)
        con = engine.connect()
    except Exception as e:  # noqa: BLE001
        return error(e)
    with con:
        out["select1"] = records(pandas.read_sql(sql="select 1 as value", con=con.connection))
        out["show_tables"] = records(pandas.read_sql(sql="show tables", con=con.connection))
        out["rows"] = records(pandas.read_sql(sql=READINGS, con=con.connection))
        inspector = sqlalchemy.inspect(engine)
        out["table_names"] = sorted(inspector.get_table_names())
        out["columns"] = [c["name"] for c in inspector.get_columns("readings.clean")]
    return out


def run_live(args):
    con = adbc_connect(args)
    with con, con.cursor() as same:
        for line in sys.stdin:
            if not line.strip():
                continue
            with con.cursor() as fresh:
                fresh.execute(args.port)
                new = [list(r) for r in fresh.fetchall()]
            same.execute(args.port)
            again = [list(r) for r in same.fetchall()]
            print(json.dumps({"new": new, "same": again}), flush=True)
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["adbc", "dbapi", "sqlalchemy", "live"])
    parser.add_argument("target", help="the URI (adbc, live) or the host (dbapi, sqlalchemy)")
    parser.add_argument("port", nargs="?", help="the port (dbapi, sqlalchemy) or the SQL (live)")
    parser.add_argument("--user")
    parser.add_argument("--password", default="")
    parser.add_argument("--token")
    parser.add_argument("--tls-root")
    args = parser.parse_args()
    out = {"adbc": run_adbc, "dbapi": run_dbapi, "sqlalchemy": run_sqlalchemy, "live": run_live}[args.mode](args)
    if out is not None:
        print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
