"""The `mt` command, installed as mt.cli: one module per subcommand. Its modules import each other
relatively (`from .options import ...`): the package is installed under another name than its folder's."""
