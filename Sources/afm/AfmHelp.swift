// SPDX-License-Identifier: Apache-2.0

/// The text of `afm --help`.
enum AfmHelp {
    static let text = """
        afm: chat with the models an afmd gateway serves

        Usage:
          afm chat [--model ID] [--url URL] [--data-dir DIR]     interactive chat with saved history
          afm chat --web [--listen HOST:PORT [--allow-remote]] [--url URL] [--data-dir DIR]
                                                                 serve the chat page on the same history
          afm chat --import DIR [--data-dir DIR]                 import an archive (conversations.json + Images/)
          afm respond [--model ID] [--url URL] [TEXT | -]        one answer for scripts (TEXT, or standard input)
          afm agent [--model ID] [--url URL] [--instructions TEXT | -f FILE] [--mcp NAME=COMMAND]…
                    [--schema FILE] [--max-tool-calls N] [--tool-timeout S] [--json] [--config FILE] [PROMPT | -]
                                                                 an agent with MCP tools: one turn with PROMPT,
                                                                 else a session (history kept until it ends)
          afm bridge [--model ID] [--url URL]                    agents and NPCs for any host: JSON-RPC 2.0, one
                                                                 message per line on stdin/stdout (docs/bridge.md)
          afm --help | --version

        Options:
          --model ID      the model to ask (default: the first model of GET /v1/models; afm bridge: on-device)
          --url URL       the gateway (default: http://127.0.0.1:11535)
          --data-dir DIR  where history.sqlite and images/ live (default: $XDG_DATA_HOME/afm,
                          else ~/.local/share/afm)
          --listen HOST:PORT  where afm chat --web listens (default: 127.0.0.1:11536, loopback only)
          --allow-remote  let --listen name an address other machines reach (the page has no login)

        In a chat, type a message and press Enter; Alt-Enter or Ctrl-J starts a new line, and pasted text is never sent
        early. Arrows, Home/End, Ctrl-A/E, Alt-B/F and Ctrl-Left/Right move; Up/Down recall this conversation's
        earlier inputs; Ctrl-R searches them. Ctrl-C stops the answer being written (and clears the line at the
        prompt); Ctrl-D on an empty line or /quit leaves. Unsent text is kept as a draft for the next start.
        NO_COLOR=1 turns colours off.

        Commands in a chat:
          /new               start a new conversation
          /list, /more       list conversations, newest first, 50 at a time
          /open ID           open a conversation (an id prefix of 4+ characters is enough)
          /earlier           show 60 earlier messages of the open conversation
          /search TEXT       find conversations by title and message text
          /rename TITLE      rename the open conversation
          /delete            delete the open conversation (asks for confirmation)
          /attach PATH       attach a PNG, JPEG, WebP or GIF image (up to 32 MiB) to the next message
          /retry             ask again after an interrupted, failed or cut-off answer
          /copy              print the last answer as plain text (and copy it on terminals that allow it)
          /help, /quit

        afm agent: --instructions TEXT is the system text of every step, -f FILE reads them from a file; --mcp
        starts an MCP server over stdio (repeatable; COMMAND is split on spaces, quotes kept); --schema asks for JSON
        matching a JSON Schema file; --max-tool-calls caps a turn's tool calls; --tool-timeout limits each tool call,
        MCP calls included (seconds, default 60; a call past it is an error output the model reads); --json prints
        every event as one JSON line. The file $XDG_CONFIG_HOME/afm/agent.conf (or --config FILE) may set [Agent]
        Model, URL, Instructions, MaxToolCalls, ToolTimeout (for servers without their own) and [MCP.<name>]
        Command, Args, Env (KEY=VALUE, repeatable), Directory, StartupTimeout, ToolTimeout. In a session, /new
        forgets the conversation, /quit leaves, Ctrl-C stops the turn.

        Exit status (afm respond, afm agent): 0 answered; 64 usage; 65 invalid request, schema or context too long;
        69 server or model unavailable; 75 timeout; 70 internal error or a tool server failing; 130 interrupted.
        See afm(1).
        """
}
