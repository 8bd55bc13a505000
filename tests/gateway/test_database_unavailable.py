"""An error saying the database cannot be reached is answered 503 with ``Retry-After``, any
other unexpected error 500 — both JSON, on a real uvicorn, keeping the connection."""

from __future__ import annotations

import sqlite3

import httpx
import pytest
import sqlalchemy.exc
from fastapi import FastAPI

from conftest import live_server
from deerflow_ext.gateway.errors import UnexpectedErrors, database_unavailable


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/refused")
    async def refused() -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    @app.get("/closed")
    async def closed() -> None:
        raise sqlalchemy.exc.OperationalError("SELECT 1", {}, sqlite3.OperationalError("database is locked"))

    @app.get("/bug")
    async def bug() -> None:
        raise ValueError("a bug")

    app.add_middleware(UnexpectedErrors)
    return app


async def test_database_errors_are_503_and_bugs_500() -> None:
    async with live_server(_app()) as server, server.client() as client:
        for path, name in (("/refused", "ConnectionRefusedError"), ("/closed", "OperationalError")):
            response = await client.get(path)
            assert response.status_code == 503, response.text
            assert response.headers["Retry-After"] == "2"
            assert response.json()["detail"] == f"the database is unavailable ({name}); retry shortly"
        response = await client.get("/bug")
        assert (response.status_code, response.json()) == (500, {"detail": "internal error: ValueError"})


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("x"),
        KeyError("k"),
        httpx.ReadTimeout("t"),
        TimeoutError(),
        sqlalchemy.exc.OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: threads")),
    ],
)
def test_other_errors_are_not_the_databases(exc: BaseException) -> None:
    assert database_unavailable(exc) is None


def test_a_cause_deep_in_the_chain_is_found() -> None:
    try:
        try:
            raise ConnectionResetError("reset")
        except ConnectionResetError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert isinstance(database_unavailable(outer), ConnectionResetError)
