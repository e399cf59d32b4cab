"""Where the closure state lives: one storage interface (backend.py), two implementations
(sqlite.py, the embedded default; postgres.py, a shared database), the schema as numbered
migrations (migrations.py), the queries both run (sessions.py, records.py), the state URL
(url.py) and the doctor's look at a PostgreSQL database (health.py). greenloop.closure.store is the
facade the rest of greenloop uses."""
