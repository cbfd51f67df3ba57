from recbole_mgformer.data.atomic import AtomicFileError, validate_atomic_file, validate_dataset_files

__all__ = ["AtomicFileError", "validate_atomic_file", "validate_dataset_files"]
