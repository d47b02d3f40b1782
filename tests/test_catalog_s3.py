"""A warehouse on object storage: ``s3://`` through a real S3-compatible server on 127.0.0.1.

moto's S3 runs behind its own HTTP server in this process (``ThreadedMotoServer``, port 0); pyiceberg
writes and reads the warehouse through it over HTTP with the ``s3.*`` catalog settings a team would
give for its object store. ``export --catalog`` writes the demo's store there and ``sql --catalog``
answers from it (through pyiceberg's Arrow scan, as docs/scale.md says); ``analyze --catalog``, which
reads a partition's files directly, refuses such a warehouse with a message instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import query
from .test_catalog import catalog_env, cli

pytest.importorskip("pyiceberg")
moto_server = pytest.importorskip("moto.server")
pytestmark = pytest.mark.slow

NAME = "objects"


@pytest.fixture
def s3_endpoint(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - an http:// URL
    import boto3

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        url = f"http://127.0.0.1:{server._server.server_port}"  # noqa: SLF001 - port 0: the port it bound
        for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                     "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(k, v)
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket="traces")
        yield url
    finally:
        server.stop()


def test_an_s3_warehouse_is_written_and_read_through_an_s3_server(demo: Path, tmp_path: Path, s3_endpoint: str) -> None:
    key = NAME.upper()
    env = {**catalog_env(tmp_path / "catalog", NAME),
           f"PYICEBERG_CATALOG__{key}__WAREHOUSE": "s3://traces/warehouse",
           f"PYICEBERG_CATALOG__{key}__S3__ENDPOINT": s3_endpoint,
           f"PYICEBERG_CATALOG__{key}__S3__REGION": "us-east-1",
           f"PYICEBERG_CATALOG__{key}__S3__ACCESS_KEY_ID": "testing",
           f"PYICEBERG_CATALOG__{key}__S3__SECRET_ACCESS_KEY": "testing"}
    n_runs = query(demo, "SELECT count(*) FROM runs WHERE status <> 'incomplete'")[0][0]
    exported = cli("export", "--db", str(demo), "--catalog", NAME, env=env)
    assert f"exported {n_runs} runs" in exported.stdout, exported.stdout
    assert not (tmp_path / "catalog" / "warehouse").exists()  # nothing on the local disk: all in the bucket
    import boto3

    keys = [o["Key"] for o in boto3.client("s3", endpoint_url=s3_endpoint).list_objects_v2(
        Bucket="traces", Prefix="warehouse/looptrace/run_records/data/")["Contents"]]
    assert keys and all(k.endswith(".parquet") for k in keys)

    sql = "SELECT status, count(*) AS n, sum(n_steps) AS steps FROM runs GROUP BY status ORDER BY status"
    over_s3 = cli("sql", "--catalog", NAME, "--format", "csv", sql, env=env).stdout
    assert over_s3 == cli("sql", "--db", str(demo), "--format", "csv",
                          sql.replace("FROM runs", "FROM runs WHERE status <> 'incomplete'")).stdout
    refused = cli("analyze", "--catalog", NAME, env=env, ok=False)
    assert refused.returncode == 1 and "is not a plain local data file" in refused.stderr, refused.stderr
