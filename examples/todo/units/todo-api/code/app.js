'use strict';
// The todo-api unit: todos per user in SQLite (better-sqlite3), every route behind the auth unit.
// Each request's bearer token is checked by calling the auth unit's GET /api/verify (AUTH_URL).
const express = require('express');
const Database = require('better-sqlite3');

function openDb(file) {
  const db = new Database(file || ':memory:');
  db.exec(`CREATE TABLE IF NOT EXISTS todos (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    owner TEXT NOT NULL,
    title TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
  )`);
  return db;
}

function row(r) {
  return { id: r.id, title: r.title, done: r.done === 1, owner: r.owner, created_at: r.created_at };
}

function createApp({ authUrl, db }) {
  const app = express();
  // The todo-fe page is served from its own loopback port: allow cross-origin calls from
  // loopback pages (and answer their preflight requests).
  app.use((req, res, next) => {
    const origin = req.get('origin');
    if (origin && /^http:\/\/(127\.0\.0\.1|localhost)(:\d+)?$/.test(origin)) {
      res.set('Access-Control-Allow-Origin', origin);
      res.set('Vary', 'Origin');
      res.set('Access-Control-Allow-Headers', 'Authorization, Content-Type');
      res.set('Access-Control-Allow-Methods', 'GET, POST, PATCH, DELETE, OPTIONS');
    }
    if (req.method === 'OPTIONS') return res.status(204).end();
    next();
  });
  app.use(express.json());

  app.get('/api/health', (req, res) => res.json({ ok: true }));

  // Every /api/todos route needs a user: ask the auth unit who the bearer token belongs to.
  app.use('/api/todos', async (req, res, next) => {
    const header = req.get('authorization') || '';
    if (!header.startsWith('Bearer ')) return res.status(401).json({ error: 'token_required' });
    try {
      const r = await fetch(`${authUrl}/api/verify`, { headers: { authorization: header } });
      if (r.status === 401) return res.status(401).json({ error: 'invalid_token' });
      if (!r.ok) return res.status(502).json({ error: 'auth_unavailable', status: r.status });
      req.user = (await r.json()).user;
      next();
    } catch (err) {
      console.error(`auth unit unreachable at ${authUrl}: ${err.message}`);
      res.status(502).json({ error: 'auth_unavailable' });
    }
  });

  app.get('/api/todos', (req, res) => {
    const items = db.prepare('SELECT * FROM todos WHERE owner = ? ORDER BY id').all(req.user.username).map(row);
    res.json({ items, count: items.length });
  });

  app.post('/api/todos', (req, res) => {
    const title = req.body && typeof req.body.title === 'string' ? req.body.title.trim() : '';
    if (!title) return res.status(400).json({ error: 'title_required' });
    const info = db.prepare('INSERT INTO todos (owner, title) VALUES (?, ?)').run(req.user.username, title);
    const created = db.prepare('SELECT * FROM todos WHERE id = ?').get(info.lastInsertRowid);
    res.status(201).json(row(created));
  });

  function own(req, res) {
    const r = db.prepare('SELECT * FROM todos WHERE id = ? AND owner = ?').get(Number(req.params.id), req.user.username);
    if (!r) res.status(404).json({ error: 'not_found' });
    return r;
  }

  app.get('/api/todos/:id', (req, res) => {
    const r = own(req, res);
    if (r) res.json(row(r));
  });

  app.patch('/api/todos/:id', (req, res) => {
    const r = own(req, res);
    if (!r) return;
    const body = req.body || {};
    if ('done' in body && typeof body.done !== 'boolean') return res.status(400).json({ error: 'done_must_be_boolean' });
    if ('title' in body && (typeof body.title !== 'string' || !body.title.trim())) {
      return res.status(400).json({ error: 'title_required' });
    }
    db.prepare('UPDATE todos SET done = ?, title = ? WHERE id = ?').run(
      'done' in body ? (body.done ? 1 : 0) : r.done,
      'title' in body ? body.title.trim() : r.title,
      r.id,
    );
    res.json(row(db.prepare('SELECT * FROM todos WHERE id = ?').get(r.id)));
  });

  app.delete('/api/todos/:id', (req, res) => {
    const r = own(req, res);
    if (!r) return;
    db.prepare('DELETE FROM todos WHERE id = ?').run(r.id);
    res.status(204).end();
  });

  app.use((req, res) => res.status(404).json({ error: 'not_found' }));
  // Malformed JSON bodies and other errors answer JSON too.
  app.use((err, req, res, next) => {
    if (err.type === 'entity.parse.failed') return res.status(400).json({ error: 'invalid_json' });
    console.error(err.stack || err);
    res.status(500).json({ error: 'internal' });
  });
  return app;
}

module.exports = { createApp, openDb };
