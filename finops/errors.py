"""Errors a user can fix. The CLI turns them into exit code 1 and one clear line."""


class InputError(Exception):
    """Bad input: names the file, row and field where it can."""

    def __init__(self, message: str, *, file: str | None = None, row: int | None = None,
                 field: str | None = None):
        self.file, self.row, self.field, self.message = file, row, field, message
        where = ", ".join(p for p in (
            f"file {file}" if file else "",
            f"row {row}" if row is not None else "",
            f"field {field}" if field else "") if p)
        super().__init__(f"{where}: {message}" if where else message)

    def in_file(self, file: str) -> "InputError":
        """The same error naming ``file`` (a check that saw rows, not the file they came from)."""
        return InputError(self.message, file=self.file or file, row=self.row, field=self.field)
