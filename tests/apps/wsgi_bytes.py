"""A WSGI application for the gunicorn test (gunicorn_device.sh).

GET /bytes/N answers N bytes (at most 16 MiB) of a fixed pattern (byte i is
i mod 251), so that the client can check every byte; anything else is 404.
"""

_PATTERN = bytes(i % 251 for i in range(251 * 1024))


def body_of(length):
    whole, rest = divmod(length, len(_PATTERN))
    return _PATTERN * whole + _PATTERN[:rest]


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    prefix = "/bytes/"
    if path.startswith(prefix) and path[len(prefix):].isdigit():
        length = int(path[len(prefix):])
        if length <= 16 << 20:
            body = body_of(length)
            start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                      ("Content-Length", str(len(body)))])
            return [body]
    start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "10")])
    return [b"not found\n"]
