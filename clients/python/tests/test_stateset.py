"""The StateSet quick start and complete example of the seeds, written with the SDK."""

import unittest

import support
from carryover import (BudgetExceeded, CarryoverError, Event, ExecResult, NotFound, Session, SessionClosed,
                       StateSetSandbox, Tool, Unauthorized)


class StateSetExample(unittest.TestCase):
    def test_complete_example(self):
        # The reference's constructor: only base_url changes.
        client = StateSetSandbox(base_url=support.server_url(), auth_token=support.TOKEN)

        # 1. Create a session (budget, sandbox, rotation, client_id).
        session = client.create_agent_session(
            name="refactor-auth",
            budget={"cost_cap_cents": 500, "iteration_limit": 100},
            sandbox={"cpus": "2", "memory": "4Gi", "timeout_seconds": 3600},
            rotation={"pre_rotate_buffer_seconds": 120},
            client_id="agent-instance-abc",
        )
        self.assertIsInstance(session, Session)
        self.assertEqual(session.state, "pending")
        self.assertEqual(session.name, "refactor-auth")
        self.assertEqual(session.budget["iteration_limit"], 100)

        # 2. Start it.
        started = client.start_agent_session(session.id)
        self.assertEqual(started.state, "running")

        # 4. Write a file (before 3, so the command has something to read).
        info = client.write_agent_session_file(session.id, "/workspace/src/notes.md",
                                               "# Progress\n- Step 1 done")
        self.assertEqual(info.path, "src/notes.md")

        # 3. Execute commands: an argv with a working dir, and a shell string.
        result = client.execute_in_agent_session(session.id, command=["cat", "notes.md"],
                                                 working_dir="/workspace/src")
        self.assertIsInstance(result, ExecResult)
        self.assertEqual(result.exit_code, 0)
        self.assertEqual(result.stdout, "# Progress\n- Step 1 done")
        result = client.execute_in_agent_session(session.id, command="echo $NODE_ENV; exit 3",
                                                 env={"NODE_ENV": "test"})
        self.assertEqual((result.stdout, result.exit_code), ("test\n", 3))
        self.assertEqual(result.stdout_bytes, b"test\n")

        # 5. Update context; read it back as part of the session.
        client.update_agent_context(session.id, {
            "working_dir": "/workspace/src",
            "env_vars": {"NODE_ENV": "test"},
            "custom_state": {"step": 1, "branch": "feature/auth"},
        })
        session = client.get_agent_session(session.id)
        self.assertEqual(session.agent_context["custom_state"], {"step": 1, "branch": "feature/auth"})
        self.assertEqual(session.agent_context["working_dir"], "/workspace/src")
        self.assertEqual(session.budget_consumed.iterations, 2)

        # Tools.
        tool = client.register_agent_tool(session.id, {
            "name": "run_tests",
            "tool_type": "custom",
            "description": "Run the project test suite",
            "input_schema": {"type": "object",
                             "properties": {"filter": {"type": "string", "description": "Test name filter"}}},
        })
        self.assertIsInstance(tool, Tool)
        tools = client.list_agent_tools(session.id)
        self.assertEqual([t.name for t in tools], ["run_tests"])
        self.assertEqual(tools[0].input_schema["properties"]["filter"]["type"], "string")

        # Heartbeat and reattach.
        hb = client.agent_session_heartbeat(session.id)
        self.assertEqual(hb.id, session.id)
        existing = client.reattach_agent_session("agent-instance-abc")
        self.assertIsNotNone(existing)
        self.assertEqual(existing.id, session.id)
        self.assertIsNone(client.reattach_agent_session("no-such-client"))

        # Events: polling with after_sequence and limit, and by type.
        events = client.get_agent_session_events(session.id, after_sequence=0, limit=50)
        self.assertTrue(all(isinstance(e, Event) for e in events))
        seqs = [e.sequence_number for e in events]
        self.assertEqual(seqs, list(range(1, len(seqs) + 1)))
        types = [e.event_type for e in events]
        for t in ("session_started", "exec_started", "exec_completed", "tool_registered", "heartbeat"):
            self.assertIn(t, types)
        later = client.get_agent_session_events(session.id, after_sequence=seqs[1], limit=2)
        self.assertEqual([e.sequence_number for e in later], seqs[2:4])
        # The end of the log first (order="desc"), then the page before it (before_sequence).
        newest = client.get_agent_session_events(session.id, limit=2, order="desc")
        self.assertEqual([e.sequence_number for e in newest], seqs[::-1][:2])
        before = client.get_agent_session_events(session.id, limit=2, order="desc",
                                                 before_sequence=newest[-1].sequence_number)
        self.assertEqual([e.sequence_number for e in before], seqs[::-1][2:4])
        execs = client.get_agent_session_events(session.id, event_type="exec_completed")
        self.assertEqual(len(execs), 2)
        self.assertTrue(all(e.event_type == "exec_completed" for e in execs))

        # 6. Stop when done; the session is closed to further work.
        stopped = client.stop_agent_session(session.id, reason="Task complete")
        self.assertEqual(stopped.state, "completed")
        with self.assertRaises(SessionClosed) as cm:
            client.execute_in_agent_session(session.id, command="true")
        self.assertEqual((cm.exception.code, cm.exception.status), ("session_closed", 409))
        self.assertIsInstance(cm.exception, CarryoverError)
        self.assertIn("session_completed", [e.event_type for e in client.get_agent_session_events(session.id)])

    def test_budget_and_node_shapes(self):
        client = support.client()
        # The Node SDK's shapes (one request dict) are accepted too.
        session = client.create_agent_session({"name": "tiny", "budget": {"iteration_limit": 2}})
        self.assertEqual((session.name, session.budget), ("tiny", {"iteration_limit": 2}))
        r = client.execute_in_agent_session(session.id, {"command": ["pwd"], "working_dir": "/workspace/"})
        self.assertEqual(r.exit_code, 0)
        client.execute_in_agent_session(session.id, command="true")
        with self.assertRaises(BudgetExceeded) as cm:
            client.execute_in_agent_session(session.id, command="true")
        self.assertEqual((cm.exception.code, cm.exception.status), ("budget_exceeded", 402))
        self.assertTrue(cm.exception.details)
        s = client.get_agent_session(session.id)
        self.assertEqual(s.budget_consumed.iterations, 2)
        self.assertIn("budget_exceeded", [e.event_type for e in
                                          client.get_agent_session_events(session.id, event_type="budget_exceeded")])
        client.delete_session(session.id)

    def test_binary_output_comes_back_exact(self):
        client = support.client()
        session = client.create_agent_session({"name": "binary"})
        # output that is not UTF-8: stdout alone would hold U+FFFD for it
        result = client.execute_in_agent_session(session.id, command="printf '\\377PNG'; printf 'caf\\351' >&2")
        self.assertEqual((result.stdout_bytes, result.stderr_bytes), (b"\xffPNG", b"caf\xe9"))
        self.assertIn("\ufffd", result.stdout)
        client.delete_session(session.id)

    def test_unknown_session_and_bad_token(self):
        client = support.client()
        with self.assertRaises(NotFound) as cm:
            client.get_agent_session("no-such-session")
        self.assertEqual((cm.exception.code, cm.exception.status), ("not_found", 404))
        self.assertEqual(cm.exception.details.get("session_id"), "no-such-session")
        bad = StateSetSandbox(base_url=support.server_url() + "/api", auth_token="wrong")
        with self.assertRaises(Unauthorized) as cm:
            bad.get_agent_session("x")
        self.assertEqual(cm.exception.status, 401)


if __name__ == "__main__":
    unittest.main()
