from typing import Iterator, List, Optional

class HopwiseError(Exception): ...
class BackendError(HopwiseError): ...

class Engine:
    def __init__(
        self,
        *,
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        index: Optional[str] = None,
        config: Optional[str] = None,
        home: Optional[str] = None,
        strategy: Optional[str] = None,
        k: Optional[int] = None,
        threads: Optional[int] = None,
        retriever: Optional[str] = None,
    ) -> None: ...
    def ask(
        self,
        question: str,
        *,
        strategy: Optional[str] = None,
        options: Optional[str] = None,
        k: Optional[int] = None,
        max_llm_calls: Optional[int] = None,
        max_seconds: Optional[float] = None,
        no_retrieval: bool = False,
    ) -> str: ...
    def ask_stream(
        self,
        question: str,
        *,
        strategy: Optional[str] = None,
        options: Optional[str] = None,
        k: Optional[int] = None,
        max_llm_calls: Optional[int] = None,
        max_seconds: Optional[float] = None,
        no_retrieval: bool = False,
    ) -> "EventStream": ...

class EventStream(Iterator[str]):
    def __iter__(self) -> "EventStream": ...
    def __next__(self) -> str: ...

def graph(trace: str, format: str) -> str: ...
def strategies() -> str: ...
def build_index(
    paths: List[str], dir: str, *, dense: bool = False, home: Optional[str] = None, config: Optional[str] = None
) -> str: ...
def search(dir: str, query: str, k: int = 5) -> str: ...
def evaluate(
    datasets: List[str],
    strategies: List[str],
    out: str,
    *,
    skip: int = 0,
    limit: Optional[int] = None,
    concurrency: int = 1,
    options: Optional[str] = None,
    context: bool = False,
    cache: bool = True,
    model: Optional[str] = None,
    base_url: Optional[str] = None,
    index: Optional[str] = None,
    config: Optional[str] = None,
    home: Optional[str] = None,
    threads: Optional[int] = None,
) -> str: ...
