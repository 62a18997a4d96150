"""Containers saved in slices: large lists and dicts of records (sliced), the fingerprints of what
their items nest (nested), small dicts holding such containers (holders), numpy object arrays (a
DataFrame's string and JSON columns: objarrays). They build on each other in that order, and on
the agent's common and spool modules; nothing here imports the rest of the agent."""
