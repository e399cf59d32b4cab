'use strict';
// Unit tests of todo-api against a stub auth server (both real HTTP servers on loopback).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { createApp, openDb } = require('../code/app');

let auth, api, base;
const TOKENS = { 'tok-alice': 'alice', 'tok-bob': 'bob' };

before(async () => {
  auth = http.createServer((req, res) => {
    const user = TOKENS[(req.headers.authorization || '').replace('Bearer ', '')];
    res.writeHead(user ? 200 : 401, { 'content-type': 'application/json' });
    res.end(JSON.stringify(user ? { user: { username: user } } : { error: 'invalid_token' }));
  });
  await new Promise((r) => auth.listen(0, '127.0.0.1', r));
  const app = createApp({ authUrl: `http://127.0.0.1:${auth.address().port}`, db: openDb(':memory:') });
  api = app.listen(0, '127.0.0.1');
  await new Promise((r) => api.once('listening', r));
  base = `http://127.0.0.1:${api.address().port}`;
});

after(() => {
  api.closeAllConnections();
  api.close();
  auth.closeAllConnections();
  auth.close();
});

function call(method, path, { token, body } = {}) {
  const headers = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  return fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
    .then(async (r) => ({ status: r.status, body: r.status === 204 ? null : await r.json() }));
}

test('created todos can be listed', async () => {
  const made = await call('POST', '/api/todos', { token: 'tok-alice', body: { title: 'buy milk' } });
  assert.equal(made.status, 201);
  assert.equal(made.body.done, false);
  const list = await call('GET', '/api/todos', { token: 'tok-alice' });
  assert.ok(list.body.items.some((t) => t.id === made.body.id && t.title === 'buy milk'));
});

test('empty title gives 400', async () => {
  const r = await call('POST', '/api/todos', { token: 'tok-alice', body: { title: '  ' } });
  assert.deepEqual(r, { status: 400, body: { error: 'title_required' } });
});

test('missing or unknown token gives 401', async () => {
  assert.equal((await call('GET', '/api/todos')).status, 401);
  assert.equal((await call('GET', '/api/todos', { token: 'forged' })).status, 401);
});

test('todos of another user are not found (404)', async () => {
  const made = await call('POST', '/api/todos', { token: 'tok-bob', body: { title: 'secret' } });
  assert.equal((await call('GET', `/api/todos/${made.body.id}`, { token: 'tok-alice' })).status, 404);
});

test('a todo can be completed and deleted', async () => {
  const made = await call('POST', '/api/todos', { token: 'tok-bob', body: { title: 'paint' } });
  const done = await call('PATCH', `/api/todos/${made.body.id}`, { token: 'tok-bob', body: { done: true } });
  assert.equal(done.body.done, true);
  assert.equal((await call('DELETE', `/api/todos/${made.body.id}`, { token: 'tok-bob' })).status, 204);
  assert.equal((await call('GET', `/api/todos/${made.body.id}`, { token: 'tok-bob' })).status, 404);
});
