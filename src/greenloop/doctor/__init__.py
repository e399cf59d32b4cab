"""`greenloop doctor`: what greenloop sees on this machine and for one workspace, each problem with its fix.

One module per area of checks (one `report.Check` each, status ok | warn | fail), run in
this order by `diagnose.diagnose`:

- `executable`: the `greenloop` executable the hooks and the MCP server call by name;
- `runner`: the framework probe finds and the runner the plan would start, with its version
  (asked without running the suite: `<python> -m pytest --version`, `node --version`, or read
  from node_modules/<runner>/package.json), and Node for JavaScript workspaces;
- `sandbox`: the mode a run would get, and each enforcer (`enforcers.available_enforcers()`:
  bubblewrap, Landlock): available, or why not and how to make it so;
- `browser`: Debian's Chromium and Playwright for Python, which browser steps of integration
  runs need (a failure only when the project's integration spec has browser steps);
- `harness`: each configuration `greenloop init` wrote (Claude Code, Codex, Gemini CLI,
  Cursor, Qwen Code, OpenCode, Copilot CLI), whether its hook and MCP commands still point at
  an existing executable and whether every hook event init writes is still there;
- `state`: `.greenloop/state.db` opens, passes `PRAGMA integrity_check` and has the schema.

A warning is advice (the workspace works without it); a failure needs a fix. Nothing is
changed: the state database is opened read-only (never migrated or rebuilt, unlike a run's
Store), version queries go through greenloop.system.proc in an empty temporary folder, and
the test suite is never run. greenloop.render.doctor_text renders the report.
"""
