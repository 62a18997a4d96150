"""Executes a small notebook with nbclient (Debian python3-nbclient) against carryover's /jupyter
through jupyter_server's GatewayKernelManager (server/jupyter_gateway_test.go); prints the executed
notebook as JSON. Usage: nbclient_run.py CARRYOVER_URL TOKEN"""
import sys

import nbformat
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.gateway.managers import GatewayKernelManager
from nbclient import NotebookClient

url, token = sys.argv[1:3]
gw = GatewayClient.instance()
gw.url = url + "/jupyter"
gw.auth_token = token
# GatewayKernelClient opens its websocket without headers: the token goes in the path.
gw.ws_url = url.replace("http", "ws", 1) + "/jupyter/token/" + token
gw.init_static_args()

nb = nbformat.v4.new_notebook()
nb.cells = [
    nbformat.v4.new_code_cell("import math\nvalues = [math.sqrt(i) for i in range(5)]\nlen(values)"),
    nbformat.v4.new_code_cell("print(round(sum(values), 3))"),
    nbformat.v4.new_code_cell("from IPython.display import display, HTML\ndisplay(HTML('<b>bold</b>'))"),
]
client = NotebookClient(nb, km=GatewayKernelManager(kernel_name="python3"), timeout=120, kernel_name="python3")
client.execute(cleanup_kc=True)  # a given km is not owned: ask nbclient to shut it down (DELETE) and close the channels
print(nbformat.writes(nb))
