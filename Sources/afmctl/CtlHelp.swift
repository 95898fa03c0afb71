// SPDX-License-Identifier: Apache-2.0

/// The help texts of `afmctl` (golden-tested: change them together with Tests/AFMCtlTests).
enum CtlHelp {
    static let main = """
        Usage: afmctl [--socket PATH] [--json] COMMAND [ARGS]

        Control a running afmd over its admin socket (varlink, interface org.afm.Admin).

        Commands:
          status                         Version, listener, backends, bind failures, counters
          top                            Live token monitor (Ctrl-C exits)
          backends                       Backends with state, generation and reason
          reload [BACKEND] [--wait]      Reload the configuration and backends, or one backend   (operator)
          listener start|stop            Start or stop the HTTP listener                         (operator)
          drain                          Fail /ready, then close the listener after the delay    (operator)
          prompt get                     Print the common prompt
          prompt set TEXT|-f FILE        Replace the common prompt ('-f -' reads stdin)          (admin)
          config show [--origin] [KEY]   Effective configuration, optionally with origins
          settings set KEY VALUE         Save a setting: host, port, listen, privateCloudPreference,
                                         commonPrompt                                            (admin)
          help [COMMAND]                 Help for one command

        Options:
          --socket PATH   Admin socket (default: $AFM_ADMIN_SOCKET, else /run/afm/admin.sock as root,
                          else $XDG_RUNTIME_DIR/afm/admin.sock; when that is missing, a `make run`
                          daemon's .build/afm/root/run/afm/admin.sock in the checkout around you)
          --json          Print the daemon's reply as JSON instead of text
          --version       Print the version, then exit
          -h, --help      Print this help, then exit

        Exit status: 0 success, 64 usage error, 65 invalid value, 66 cannot read the input file,
        69 cannot connect, 70 failure, 74 saved and in force but not flushed to disk, 75 timeout,
        77 permission denied.
        """

    static let commands: [String: String] = [
        "status": """
            Usage: afmctl status [--json]

            Print the daemon's version, uptime, listener state and address (with the last bind failure, if any),
            backends and token counters. Level: user.
            """,
        "top": """
            Usage: afmctl top [--interval MS] [--json]

            Show the live token monitor: totals since the last start, the most recently updated request, what
            remains of each backend's daily quota (per upstream for the private cloud), and each backend's prompt
            cache (entries and bytes in RAM and on disk, hits, misses, evictions). In a terminal the screen is
            redrawn on every update; when piped, one line per update.
            Ctrl-C (SIGINT) or SIGTERM stops it, with exit status 0. Level: user.
            """,
        "backends": """
            Usage: afmctl backends [--json]

            List the backends with their state, active generation, version and failure reason. Level: user.
            """,
        "reload": """
            Usage: afmctl reload [BACKEND] [--wait]

            Reload the configuration and every backend whose configuration, model file or library changed, or
            only BACKEND. The reply comes when the new generation serves; on failure the old generation keeps
            serving and the reason is printed. Progress goes to stderr. --wait waits without a time limit
            (for ExecReload=). Level: operator.
            """,
        "listener": """
            Usage: afmctl listener start|stop

            Start or stop the HTTP listener. Stop closes the listener and every accepted connection; it lasts
            until the next start or restart. Start also ends a drain. Level: operator.
            """,
        "drain": """
            Usage: afmctl drain

            Drain this node as SIGTERM does, without exiting: GET /ready answers 503 at once, the listener keeps
            serving for [Server] DrainDelaySeconds (so a load balancer's health check takes the node out), then
            closes, and in-flight responses finish. Returns when the listener is closed; 'afmctl listener start'
            serves again. Level: operator.
            """,
        "prompt": """
            Usage: afmctl prompt get
                   afmctl prompt set TEXT | -f FILE [--if-revision N]

            Print or replace the common prompt that is prepended to every request. '-f -' reads standard
            input. --if-revision refuses the change when someone else changed the prompt since revision N.
            Levels: get user, set admin.
            """,
        "config": """
            Usage: afmctl config show [--origin] [KEY]

            Print the effective configuration as Section.Key=Value, or one KEY. --origin adds where each value
            came from (file:line, environment, command line, control layer or default). Level: user.
            """,
        "settings": """
            Usage: afmctl settings set KEY VALUE

            Save one versioned setting in the control layer. KEY is host, port, listen (HOST:PORT),
            privateCloudPreference (yes/no) or commonPrompt. An invalid value is refused and the last valid
            one stays. Level: admin.
            """,
    ]
}
