'use strict';
// The todo-fe unit: plain JavaScript, no build step. It lists and adds the logged-in user's todos
// through the todo-api unit and logs in through the auth unit.
//
// Where the backends are comes from whoever serves the page: greenloop injects
// window.__API_BASE__ (the todo-api, the unit's first dependency) and window.__GREENLOOP__
// ({api_base, backends}); the same object is served as /greenloop-config.json.
(function () {
  const $ = (sel) => document.querySelector(sel);
  let api = '';
  let auth = '';
  let token = sessionStorage.getItem('todo-token');

  function showError(message) {
    const el = $('#error');
    el.textContent = message;
    el.hidden = false;
    document.body.dataset.state = 'error';
  }

  function clearError() {
    $('#error').hidden = true;
    $('#error').textContent = '';
  }

  async function config() {
    if (window.__GREENLOOP__) return window.__GREENLOOP__;
    try {
      const r = await fetch('/greenloop-config.json');
      if (r.ok) return await r.json();
    } catch (err) {
      // served without greenloop: same-origin backends
    }
    return { api_base: window.__API_BASE__ || '', backends: {} };
  }

  // fetch that turns "the server is not there" into one message the page shows.
  async function call(base, what, path, options) {
    let r;
    try {
      r = await fetch(base + path, options);
    } catch (err) {
      console.error(`cannot reach ${what} at ${base}: ${err.message}`);
      throw new Error(`Cannot reach the ${what} at ${base || 'this site'}. Is it running?`);
    }
    const body = r.status === 204 ? null : await r.json().catch(() => null);
    return { status: r.status, ok: r.ok, body };
  }

  function headers() {
    return { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` };
  }

  function render(items) {
    const list = $('#todos');
    list.replaceChildren(
      ...items.map((t) => {
        const li = document.createElement('li');
        li.textContent = t.title;
        li.dataset.id = String(t.id);
        if (t.done) li.classList.add('done');
        return li;
      }),
    );
    $('#status').textContent = items.length === 1 ? '1 todo' : `${items.length} todos`;
  }

  async function loadTodos() {
    const r = await call(api, 'todo service', '/api/todos', { headers: headers() });
    if (r.status === 401) return loggedOut('Your session has ended; log in again.');
    if (!r.ok) throw new Error(`The todo service answered ${r.status} (${(r.body && r.body.error) || 'error'}).`);
    render(r.body.items);
    document.body.dataset.state = 'ready';
  }

  function loggedOut(message) {
    token = null;
    sessionStorage.removeItem('todo-token');
    $('#app').hidden = true;
    $('#login').hidden = false;
    document.body.dataset.state = 'login';
    if (message) showError(message);
  }

  async function loggedIn(user) {
    $('#login').hidden = true;
    $('#app').hidden = false;
    $('#who').textContent = user ? `Logged in as ${user.name || user.username}` : '';
    await loadTodos();
  }

  async function onLogin(event) {
    event.preventDefault();
    clearError();
    const form = event.target;
    const r = await call(auth, 'login service', '/api/login', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username: form.username.value, password: form.password.value }),
    });
    if (r.status === 401) return showError('Wrong username or password.');
    if (!r.ok) throw new Error(`The login service answered ${r.status}.`);
    token = r.body.token;
    sessionStorage.setItem('todo-token', token);
    form.password.value = '';
    await loggedIn(r.body.user);
  }

  async function onAdd(event) {
    event.preventDefault();
    clearError();
    const input = event.target.title;
    const title = input.value.trim();
    if (!title) return showError('Write a title first.');
    const r = await call(api, 'todo service', '/api/todos', {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({ title }),
    });
    if (r.status === 401) return loggedOut('Your session has ended; log in again.');
    if (!r.ok) throw new Error(`Could not add the todo (${(r.body && r.body.error) || r.status}).`);
    input.value = '';
    await loadTodos();
  }

  // Any failure of a handler is shown on the page instead of vanishing into the console.
  const guarded = (fn) => (event) => fn(event).catch((err) => showError(err.message));

  async function start() {
    const cfg = await config();
    api = cfg.api_base || '';
    auth = (cfg.backends && cfg.backends.auth) || api;
    $('#login').addEventListener('submit', guarded(onLogin));
    $('#new-todo').addEventListener('submit', guarded(onAdd));
    await call(api, 'todo service', '/api/health', {});
    if (token) await loggedIn(null);
    else loggedOut();
  }

  start().catch((err) => showError(err.message));
})();
