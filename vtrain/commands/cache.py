"""`vtrain cache info|clear`: vtrain's cache, the environments `vtrain local` installs trainers into and
every other folder vtrain writes there."""

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
    """vtrain's cache: trainer environments, sdists, image layers and unpacked images.

    Trainers are installed into environments cached by content hash under VTRAIN_CACHE_DIR
    (default ~/.cache/vtrain); a damaged one is rebuilt by itself. `info` shows them and every
    other folder vtrain writes there, `clear` removes all of it but what a running job uses.
    """


@cache.command()
@output_option("text", "json")
def info(output: str) -> None:
    """Where the cache is and what it holds: each environment's state, size and last use, then each folder there
    (its files, size and what it holds); `-o json` lists every folder vtrain writes, there or not."""
    from vtrain.local import cacheadmin
    from vtrain.local.envcache import default_cache_dir

    data = cacheadmin.info(default_cache_dir())
    if output == "json":
        echo_json(data)
        return
    click.echo(f"cache {printable(data['cache_dir'])}: {_size(data['size'])}"
               f"{'' if data['exists'] else ' (not created yet)'}")
    for env in data["envs"]:
        used = f", last used {env['last_used']}" if env["last_used"] else ""
        click.echo(f"  env {printable(env['key'])}  {env['state']:<10} {_size(env['size']):>10}{used}  "
                   f"{printable(', '.join(env['sdists']))}")  # names of files in the cache: anyone's
    for name, part in data["folders"].items():
        if not part["exists"]:
            continue
        held = " (in use by a running job)" if part["held"] else ""
        click.echo(f"  {name:<16} {part['files']:>6} file(s) {_size(part['size']):>10}  {part['what']}{held}")
    if data["other"]:
        names = ", ".join(printable(n) for n in data["other"][:5])
        more = f" and {len(data['other']) - 5} more" if len(data["other"]) > 5 else ""
        click.echo(f"  not vtrain's (left alone): {names}{more}")


@cache.command()
@output_option("text", "json")
def clear(output: str) -> None:
    """Remove every cached environment and folder no running job uses: sdists, downloads, image layers, images."""
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
    click.echo(f"freed {_size(data['freed'])} in {printable(data['cache_dir'])}")
