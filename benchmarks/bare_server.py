"""The framework floor for the per-chunk rows: one FastAPI route on the same uvicorn stack and
options as ``render-service serve`` that parses the request body with orjson and answers a JSON
body of a given size (``python -m benchmarks.bare_server --port P --size N``)."""

from __future__ import annotations

import argparse

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response


def make_app(size: int) -> FastAPI:
    """The app: ``POST /bare`` parses the body with orjson, answers ``size`` bytes of JSON."""
    app = FastAPI()
    answer = orjson.dumps({"pad": "x" * max(0, size - 10)})

    @app.post("/bare")
    async def bare(request: Request) -> Response:
        orjson.loads(await request.body())
        return Response(answer, media_type="application/json")

    return app


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    args = p.parse_args()
    # the options render_service.serving.server.serve passes (loop/http "auto" as there)
    uvicorn.run(make_app(args.size), host="127.0.0.1", port=args.port, log_level="warning",
                access_log=False, timeout_keep_alive=5)


if __name__ == "__main__":
    main()
