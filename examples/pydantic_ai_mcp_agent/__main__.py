"""python -m examples.pydantic_ai_mcp_agent --model M [--api-base URL] [--mcp-url URL] [--host H] [--port P]"""

from __future__ import annotations

import argparse
import os

import uvicorn

from .agent import a2a_app, build_agent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.pydantic_ai_mcp_agent",
                                     description="A Pydantic AI agent with MCP tools, served by fasta2a over A2A.")
    parser.add_argument("--model", required=True,
                        help="a model of the endpoint at --api-base, or a Pydantic AI model name (openai:gpt-4.1)")
    parser.add_argument("--api-base", help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8765/v1")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY",
                        help="the variable holding the endpoint's API key (default OPENAI_API_KEY)")
    parser.add_argument("--mcp-url", help="one fixed MCP server URL (tau2-a2a run --a2a-mcp-fixed); by default "
                                          "each conversation's first message names its own")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--public-url", help="the URL the card gives (default http://HOST:PORT)")
    args = parser.parse_args(argv)
    url = args.public_url or f"http://{args.host}:{args.port}"
    agent = build_agent(args.model, args.api_base, os.environ.get(args.api_key_env), args.mcp_url)
    tools = f"the MCP server at {args.mcp_url}" if args.mcp_url else "each conversation's MCP server"
    print(f"Pydantic AI agent ({args.model}) at {url}, its tools on {tools}", flush=True)
    uvicorn.run(a2a_app(agent, url), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
