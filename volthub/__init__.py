"""volthub: a self-hostable developer platform for live streaming."""


def version() -> str:
    """The installed distribution's version (0.0.0 when run from an uninstalled tree)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("volthub")
    except PackageNotFoundError:
        return "0.0.0"
