"""The guarded downloader of Slack files (issue 27): the bot token reaches Slack's file host
and nothing else, whatever a `url_private` or a redirect says; sizes are capped while the
bytes arrive; a file's type is its bytes', not its name's; each file is read once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.conversation.tokens import LARGEST_IMAGE_TOKENS, image_tokens
from bot.db.session import Database
from bot.files.download import (
    PER_FILE_BYTES,
    Allowance,
    Downloader,
    FileHost,
    Refused,
)
from bot.files.kinds import sniff
from bot.files.store import FileStore, SlackFile
from bot.slack.scopes import gaps
from tests.fakes.slack import BOT_TOKEN, FakeSlack, manifest_scopes
from tests.fakes.slack_files import FakeFile
from tests.files_samples import Evil, pdf, png


@pytest.fixture
def evil() -> Iterator[Evil]:
    server = Evil().start()
    yield server
    server.stop()


def downloader(slack: FakeSlack, per_file: int = PER_FILE_BYTES) -> Downloader:
    return Downloader(BOT_TOKEN, FileHost.for_api(slack.api_url), per_file=per_file)


def test_the_file_host_is_slacks_or_exactly_the_api_urls() -> None:
    assert FileHost.for_api("https://slack.com/api/") == FileHost("https", "files.slack.com", 443)
    assert FileHost.for_api("https://slack-gov.com/api/").host == "files.slack-gov.com"
    local = FileHost.for_api("http://127.0.0.1:3000/api/")
    assert local == FileHost("http", "127.0.0.1", 3000)
    from yarl import URL

    assert local.owns(URL("http://127.0.0.1:3000/files-pri/T-F1/a.png"))
    for other in (
        "https://127.0.0.1:3000/x",  # another scheme
        "http://127.0.0.1:3001/x",  # another port
        "http://localhost:3000/x",  # the same machine by another name
        "http://127.0.0.1:3000@evil.example/x",  # user info: the host is evil.example
        "http://u:p@127.0.0.1:3000/x",
        "/files-pri/T-F1/a.png",  # relative
    ):
        assert not local.owns(URL(other)), other


def _authorities(slack: str, evil: str) -> st.SearchStrategy[str]:
    return st.sampled_from(
        [
            evil,
            f"{slack}@{evil}",
            f"{slack}:x@{evil}",
            f"user:pw@{slack}",
            f"{evil}#@{slack}",
            f"{evil}?@{slack}",
            f"{evil}\\@{slack}",
            f"localhost:{slack.rsplit(':', 1)[1]}",
            f"[::1]:{slack.rsplit(':', 1)[1]}",
            f"2130706433:{slack.rsplit(':', 1)[1]}",
            f"0x7f.0.0.1:{slack.rsplit(':', 1)[1]}",
            f"127.1:{slack.rsplit(':', 1)[1]}",
            f"{slack}.evil.example",
            "169.254.169.254",
            "files.slack.com",
            "10.0.0.1:80",
        ]
    )


def test_no_token_reaches_anything_but_the_file_host_under_fuzzed_urls(
    fake_slack: FakeSlack, evil: Evil
) -> None:
    """A fuzzed `url_private`: other hosts, user-info tricks, IP literals, and genuine files
    that redirect to other hosts. Only the genuine file is fetched; nothing else is asked."""
    slack = f"127.0.0.1:{fake_slack.api_url.split(':')[2].split('/')[0]}"
    bad = f"127.0.0.1:{evil.port}"
    genuine = fake_slack.files.add("ok.txt", b"fine", "text/plain")
    listed = fake_slack.files.listing(genuine)
    redirects = [
        f"http://{bad}/steal",
        f"//{bad}/steal",
        f"http://{slack}@{bad}/again",
        f"http://localhost:{slack.rsplit(':', 1)[1]}/files-pri/x/download/a",
        f"https://{slack}/files-pri/x/download/a",
        "http://169.254.169.254/latest/meta-data/",
    ]
    for n, target in enumerate(redirects):
        fake_slack.files.add(f"r{n}.txt", b"x", "text/plain").redirect_to = target
    redirecting = [
        fake_slack.files.listing(f)["url_private"] for f in fake_slack.files.files.values()
    ][1:]
    fetched: list[bytes] = []
    tool = downloader(fake_slack)

    async def fetch(url: str) -> None:
        with contextlib.suppress(Refused):
            fetched.append((await tool.fetch(url, Allowance())).data)

    schemes = st.sampled_from(["http", "https", "HTTP", "ftp", "file", "javascript"])
    paths = st.sampled_from(["/", "/files-pri/T0TEST-F00000001/ok.txt", "/again", ""])
    forged = st.builds(lambda s, a, p: f"{s}://{a}{p}", schemes, _authorities(slack, bad), paths)
    urls = st.one_of(
        forged,
        st.sampled_from(redirecting),
        st.just(listed["url_private"]),
        st.text(max_size=40),
    )

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(urls)
    def attempt(url: str) -> None:
        asyncio.run(fetch(url))

    attempt()
    asyncio.run(fetch(listed["url_private"]))  # the genuine file, at least once
    assert evil.seen == []  # not a single request, with or without the token
    carrying = [r for r in fake_slack.files.requests if r.token is not None]
    assert carrying
    assert {r.host for r in carrying} == {slack}
    assert set(fetched) == {b"fine"}


async def test_sizes_are_capped_while_streaming(fake_slack: FakeSlack) -> None:
    small = downloader(fake_slack, per_file=1000)
    exact = fake_slack.files.add("a.log", b"a" * 1000, "text/plain")
    over = fake_slack.files.add("b.log", b"b" * 1001, "text/plain")
    chunked = fake_slack.files.add("c.log", b"c" * 300_000, "text/plain")
    chunked.chunked = True  # no Content-Length: only counting while reading can stop it

    def url(file: FakeFile) -> str:
        return str(fake_slack.files.listing(file)["url_private"])

    assert len((await small.fetch(url(exact), Allowance())).data) == 1000
    for file in (over, chunked):
        with pytest.raises(Refused, match="larger than"):
            await small.fetch(url(file), Allowance())
    # The real cap: 10 MB, streamed without a length.
    huge = fake_slack.files.add("d.log", b"d" * (PER_FILE_BYTES + 1), "text/plain")
    huge.chunked = True
    with pytest.raises(Refused, match="larger than 10 MB"):
        await downloader(fake_slack).fetch(url(huge), Allowance())
    # Per turn: what is left of the turn's allowance caps the next file.
    turn = Allowance(left=1500)
    await small.fetch(url(exact), turn)
    with pytest.raises(Refused, match="together"):
        await small.fetch(url(exact), turn)


def test_doctor_names_files_read_when_the_token_lacks_it() -> None:
    (gap,) = gaps(manifest_scopes() - {"files:read"})
    assert gap.any_of == {"files:read"}
    assert "read the files shared in a thread" in gap.sentence()
    assert "files:read" in manifest_scopes()


def test_the_type_is_the_bytes_not_the_name() -> None:
    image = sniff(png(800, 600))
    assert (image.kind, image.mimetype, image.width, image.height) == (
        "image",
        "image/png",
        800,
        600,
    )
    assert sniff(b"just text, named photo.png").kind == "text"
    assert sniff(pdf("hello")).kind == "pdf"
    assert sniff(b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 40).kind == "other"
    assert sniff(b"GIF89a\x10\x00\x20\x00").width == 16
    assert sniff(b"\xff\xd8\xff\xe0" + b"\x00" * 10).kind == "image"  # a cut JPEG: no size
    assert sniff("naïve café".encode("latin-1")).kind == "other"  # not UTF-8: not text
    # OpenAI's rule: 512-px tiles at 170 tokens, plus 85.
    assert image_tokens(800, 600) == 85 + 170 * 4
    assert image_tokens(4096, 8192) == 85 + 170 * 6  # 1024 x 2048 -> 768 x 1536
    assert image_tokens(None, None) == LARGEST_IMAGE_TOKENS


async def test_each_file_is_read_once_and_the_sign_in_page_is_not_a_file(
    fake_slack: FakeSlack, tmp_path: Path, sqlite_url: str
) -> None:
    db = Database.from_url(sqlite_url)
    store = FileStore(db, downloader(fake_slack))
    data = pdf("Quarterly revenue was 4.2 million")
    first = fake_slack.files.add("q3.pdf", data, "application/pdf")
    twin = fake_slack.files.add("copy.pdf", data, "application/pdf")

    def slack_file(f: FakeFile) -> SlackFile:
        listed = fake_slack.files.listing(f)
        return SlackFile(listed["id"], listed["name"], listed["url_private"], 1, None, "UALICE")

    read = await store.read("T0TEST", slack_file(first), "C:C1", Allowance())
    assert read.row is not None
    assert "4.2 million" in (read.row.text or "")
    before = len(fake_slack.files.requests)
    again = await store.read("T0TEST", slack_file(first), "C:C1", Allowance())
    assert again.row is not None
    assert again.row.id == read.row.id
    assert len(fake_slack.files.requests) == before  # not downloaded again
    same = await store.read("T0TEST", slack_file(twin), "C:C1", Allowance())
    assert same.row is not None
    assert same.row.sha256 == read.row.sha256
    # Without files:read Slack answers its sign-in page: named as such, not read as text.
    fake_slack.scopes = manifest_scopes() - {"files:read"}
    locked = fake_slack.files.add("notes.txt", b"secret notes", "text/plain")
    refused = await store.read("T0TEST", slack_file(locked), "C:C1", Allowance())
    assert refused.row is None
    assert "files:read" in (refused.problem or "")
    await db.dispose()
