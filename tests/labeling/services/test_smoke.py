from tests.conftest import native_record


def test_native_record_imports(import_records):
    result = import_records([native_record()])
    assert result.created["questions"] == 1
