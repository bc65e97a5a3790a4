"""`vtrain cache info|clear`: the environment cache that `vtrain local` installs trainers into."""

from __future__ import annotations

import click

from vtrain.commands._options import echo_json, output_option
from vtrain.foreign import printable


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


@click.group()
def cache() -> None:
    """The environment cache of `vtrain local` and `vtrain emulator --run-jobs`.

    Trainers are installed into environments cached by content hash under VTRAIN_CACHE_DIR
    (default ~/.cache/vtrain); a damaged one is rebuilt by itself. `info` shows them, `clear`
    removes every one no running job uses, with the built sdists and downloaded packages.
    """


@cache.command()
@output_option("text", "json")
def info(output: str) -> None:
    """Where the cache is and what it holds: each environment's state, size and last use."""
    from vtrain.local import cacheadmin
    from vtrain.local.envcache import default_cache_dir

    data = cacheadmin.info(default_cache_dir())
    if output == "json":
        echo_json(data)
        return
    click.echo(f"cache {data['cache_dir']}: {_size(data['size'])}{'' if data['exists'] else ' (not created yet)'}")
    for env in data["envs"]:
        used = f", last used {env['last_used']}" if env["last_used"] else ""
        click.echo(f"  env {printable(env['key'])}  {env['state']:<10} {_size(env['size']):>10}{used}  "
                   f"{printable(', '.join(env['sdists']))}")  # names of files in the cache: anyone's
    for name in ("sdists", "downloads", "sdist-files"):
        part = data[name]
        click.echo(f"  {name:<11} {part['files']} file(s), {_size(part['size'])}")


@cache.command()
@output_option("text", "json")
def clear(output: str) -> None:
    """Remove every cached environment no running job uses, the built sdists and the downloads."""
    from vtrain.local import cacheadmin
    from vtrain.local.envcache import default_cache_dir

    data = cacheadmin.clear(default_cache_dir())
    if output == "json":
        echo_json(data)
        return
    for path in data["removed"]:
        click.echo(f"removed {printable(str(path))}")
    for kept in data["kept"]:
        click.echo(f"kept {printable(str(kept['path']))} ({kept['why']})")
    click.echo(f"freed {_size(data['freed'])} in {data['cache_dir']}")
