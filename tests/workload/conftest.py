import pytest

from aifabric.catalog import gpu


@pytest.fixture
def h100():
    return gpu("H100")
