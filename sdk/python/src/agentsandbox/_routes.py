"""The worker API's routes, as the SDK calls them: every request goes
through one of these, and the conformance test compares them with
docs/openapi.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple
from urllib.parse import quote


@dataclass(frozen=True)
class Route:
    """One operation: a method and a path template (``{id}``, ``{pid}``, ``{port}``, ``{path}``, ``{digest}``)."""

    method: str
    template: str

    def path(self, **params: object) -> str:
        """The template with each parameter escaped; ``path``, a workspace
        path, comes escaped already (see _core.file_path)."""
        out = self.template
        for k, v in params.items():
            out = out.replace("{" + k + "}", str(v) if k == "path" else quote(str(v), safe=""))
        return out


CREATE = Route("POST", "/v1/sandboxes")
LIST = Route("GET", "/v1/sandboxes")
GET = Route("GET", "/v1/sandboxes/{id}")
EXTEND = Route("PATCH", "/v1/sandboxes/{id}")
DELETE = Route("DELETE", "/v1/sandboxes/{id}")
EXEC = Route("POST", "/v1/sandboxes/{id}/exec")
PROCESSES = Route("GET", "/v1/sandboxes/{id}/processes")
PROCESS = Route("GET", "/v1/sandboxes/{id}/processes/{pid}")
OUTPUT = Route("GET", "/v1/sandboxes/{id}/processes/{pid}/output")
SIGNAL = Route("POST", "/v1/sandboxes/{id}/processes/{pid}/signal")
STDIN = Route("POST", "/v1/sandboxes/{id}/processes/{pid}/stdin")
ATTACH = Route("GET", "/v1/sandboxes/{id}/processes/{pid}/attach")
BROWSER = Route("GET", "/v1/sandboxes/{id}/browser")
BROWSER_VERSION = Route("GET", "/v1/sandboxes/{id}/browser/json/version")
PUT_FILE = Route("PUT", "/v1/sandboxes/{id}/files/{path}")
GET_FILE = Route("GET", "/v1/sandboxes/{id}/files/{path}")
DELETE_FILE = Route("DELETE", "/v1/sandboxes/{id}/files/{path}")
GET_ARCHIVE = Route("GET", "/v1/sandboxes/{id}/archive/{path}")
PUT_ARCHIVE = Route("PUT", "/v1/sandboxes/{id}/archive/{path}")
PORT = Route("GET", "/v1/sandboxes/{id}/ports/{port}/{path}")
PREVIEW = Route("POST", "/v1/sandboxes/{id}/ports/{port}/preview")
PULL_IMAGE = Route("POST", "/v1/images")
LIST_IMAGES = Route("GET", "/v1/images")
DELETE_IMAGE = Route("DELETE", "/v1/images/{digest}")
STATUS = Route("GET", "/v1/status")
SELFTEST = Route("POST", "/v1/selftest")

#: Every route the SDK calls.
ALL: Tuple[Route, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Route))
