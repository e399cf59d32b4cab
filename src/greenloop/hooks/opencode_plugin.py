"""The OpenCode plugin `greenloop init opencode` writes: `.opencode/plugin/greenloop.js`.

The file is greenloop's whole (rewritten on every init, "unchanged" when it already reads the
same); other plugins are other files and are never touched. The hook command is the file's
`GREENLOOP_HOOK` line, as a JSON string, so `greenloop doctor` can read it back
(`hook_command_of`). What the plugin sends and how it acts on the answers: greenloop.hooks.opencode.
"""

from __future__ import annotations

import json
import re

__all__ = ["PLUGIN_PATH", "hook_command_of", "plugin_source"]

PLUGIN_PATH = ".opencode/plugin/greenloop.js"
_HOOK_LINE = re.compile(r'^const GREENLOOP_HOOK = ("(?:[^"\\]|\\.)*");?$', re.M)

_TEMPLATE = """\
// greenloop's closure gate for OpenCode, written by `greenloop init opencode` (run it again to
// refresh this file; edits here are replaced). Each event goes to `greenloop hook opencode` as
// one JSON object on stdin; when a turn ends red, greenloop's answer sends the agent back with
// the failing tests (client.session.promptAsync), at most max_intercept_rounds times a turn.
import { spawn } from "node:child_process"

const GREENLOOP_HOOK = __COMMAND__

function ask(payload) {
  return new Promise((resolve) => {
    let out = ""
    let err = ""
    let child
    try {
      child = spawn(GREENLOOP_HOOK, { shell: true, stdio: ["pipe", "pipe", "pipe"] })
    } catch (e) {
      resolve({ answer: {}, err: String(e) })
      return
    }
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (err += d))
    child.on("error", (e) => resolve({ answer: {}, err: err + String(e) }))
    child.on("close", () => {
      let answer = {}
      try {
        answer = out.trim() ? JSON.parse(out) : {}
      } catch {}
      resolve({ answer, err })
    })
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(payload))
  })
}

export const GreenloopPlugin = async ({ client, directory }) => {
  const log = (level, message) =>
    client.app.log({ body: { service: "greenloop", level, message } }).catch(() => {})
  const send = async (payload) => {
    const { answer, err } = await ask({ cwd: directory, ...payload })
    if (err.trim()) await log("info", err.trim())
    return answer || {}
  }
  const isChild = async (id) => {
    try {
      const got = await client.session.get({ path: { id } })
      return Boolean(got?.data?.parentID)
    } catch {
      return false
    }
  }
  return {
    event: async ({ event }) => {
      const id = event?.properties?.sessionID ?? event?.properties?.info?.id
      if (event.type === "session.created" && id) {
        const created = { hook_event_name: "session.created", session_id: id }
        if (!event.properties.info?.parentID) await send(created)
        return
      }
      if (event.type !== "session.idle" || !id || (await isChild(id))) return
      const answer = await send({ hook_event_name: "session.idle", session_id: id })
      if (answer.action === "continue" && answer.message) {
        const parts = [{ type: "text", text: answer.message }]
        await client.session.promptAsync({ path: { id }, body: { parts } })
      } else if (answer.action === "release" && answer.message) {
        await log("warn", answer.message)
        await client.tui.showToast({ body: { message: answer.message, variant: "warning" } }).catch(() => {})
      }
    },
    "chat.message": async (input, output) => {
      const prompt = (output?.parts ?? [])
        .filter((p) => p.type === "text" && !p.synthetic)
        .map((p) => p.text)
        .join("\\n")
      await send({
        hook_event_name: "chat.message",
        session_id: input.sessionID,
        message_id: input.messageID,
        agent: input.agent,
        prompt,
      })
    },
    "tool.execute.after": async (input, output) => {
      const tool = input.tool
      if (tool !== "bash" && !/^greenloop_test_(run|job)$/.test(tool)) return
      await send({
        hook_event_name: "tool.execute.after",
        session_id: input.sessionID,
        tool,
        args: input.args,
        output: output?.metadata?.output ?? output?.output,
        exit: output?.metadata?.exit,
      })
    },
  }
}
"""


def plugin_source(command: str) -> str:
    """The plugin's text, calling `command` (config_merge.hook_command("opencode"))."""
    return _TEMPLATE.replace("__COMMAND__", json.dumps(command))


def hook_command_of(text: str) -> str | None:
    """The hook command a greenloop plugin file calls, or None when the file is not one."""
    match = _HOOK_LINE.search(text)
    if match is None:
        return None
    value = json.loads(match.group(1))
    return value if isinstance(value, str) else None
