"""Files written whole or not at all, JSON read with one-line errors, and locks.

* `atomic`: every file or directory the library writes for a user goes
  through a temporary beside it and is renamed into place (`write_atomically`,
  `write_json_atomically`, `write_files_atomically`, `staged_path`,
  `replace_directory`); a full disk is one error naming the file.
* `json_files`: reading a JSON file or one JSON-lines row, naming the file
  and line of what is wrong.
* `locks`: `OutputLock`, the exclusive lock of what a run writes.

This package imports nothing else of the library: every other package may use it.
"""
