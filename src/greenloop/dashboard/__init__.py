"""The live dashboard (`greenloop serve`): runs, failures, sessions, bugs and integration runs
in the browser, with a run's output streamed over Server-Sent Events.

- `live`: the small registry a running `greenloop serve` and the run path share (light: the
  run path imports it; no web code);
- `data`: read-only queries over the state database, the run folders and the bug log;
- `pages`: server-rendered HTML (every value escaped);
- `app`: the Starlette app (token and Host checks, pages, SSE streams).
"""
