"""The notes both servers hold: 200 pages, half English, half Chinese, three of them long (500, 1,000
and 2,000 blocks), and the pages the tasks work on. mnote gets them as a workspace fixture, the
filesystem server as one Markdown file per page (`<title>.md`, the body as mnote renders it, without
block ids), so both hold the same text."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from mnote_mcp.kernel.blocks import Block
from mnote_mcp.kernel.markdown import render_markdown
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.store.fixtures import load_fixture

WORKSPACE, ACTOR = "ws_notes", "user_1"
PAGES = 200

_EN = [
    "plan",
    "team",
    "review",
    "budget",
    "design",
    "launch",
    "customer",
    "support",
    "release",
    "quality",
    "metric",
    "goal",
    "risk",
    "schedule",
    "meeting",
    "feedback",
    "product",
    "market",
    "research",
    "data",
    "model",
    "service",
    "api",
    "client",
    "server",
    "test",
    "deploy",
    "incident",
    "report",
    "summary",
    "roadmap",
    "hiring",
    "onboarding",
    "training",
    "process",
    "policy",
    "contract",
    "invoice",
    "payment",
    "order",
    "shipping",
    "inventory",
    "vendor",
    "partner",
    "campaign",
    "content",
    "website",
    "mobile",
    "app",
    "security",
    "privacy",
    "audit",
    "backup",
    "storage",
    "network",
    "latency",
    "cost",
    "forecast",
    "quarter",
    "milestone",
    "owner",
    "decision",
    "action",
    "note",
    "idea",
    "question",
    "answer",
    "priority",
    "scope",
    "estimate",
    "sprint",
    "backlog",
    "ticket",
    "bug",
]
_ZH = [
    "计划",
    "团队",
    "评审",
    "预算",
    "设计",
    "发布",
    "客户",
    "支持",
    "版本",
    "质量",
    "指标",
    "目标",
    "风险",
    "进度",
    "会议",
    "反馈",
    "产品",
    "市场",
    "研究",
    "数据",
    "模型",
    "服务",
    "接口",
    "测试",
    "部署",
    "事故",
    "报告",
    "总结",
    "路线",
    "招聘",
    "培训",
    "流程",
    "制度",
    "合同",
    "发票",
    "付款",
    "订单",
    "物流",
    "库存",
    "供应商",
    "伙伴",
    "活动",
    "内容",
    "网站",
    "移动",
    "应用",
    "安全",
    "隐私",
    "审计",
    "备份",
    "存储",
    "网络",
    "延迟",
    "成本",
    "预测",
    "季度",
    "里程碑",
    "负责人",
    "决定",
    "行动",
    "笔记",
    "想法",
    "问题",
    "答案",
    "优先级",
    "范围",
    "估算",
    "迭代",
    "待办",
    "工单",
    "缺陷",
]


@dataclass(frozen=True)
class Page:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)

    def markdown(self) -> str:
        return render_markdown(self.blocks, title=self.title)


# The pages the tasks name, by what they hold (tasks.py reads these constants, never the ids).
CUTOVER = "The database cutover starts on Monday 14 September at 06:00 UTC, after the final backup."
CUTOVER_ZH = "数据库割接将于九月十四日星期一早上六点开始，在最后一次备份完成之后进行。"
MISSPELT, SPELT = "recieve", "receive"
COLOUR = "Every heading uses the brand colour and a single weight."


def _sentence(rng: random.Random, words: tuple[str, ...] | list[str], chinese: bool) -> str:
    picked = [rng.choice(words) for _ in range(rng.randint(8, 16))]
    if chinese:
        return "".join(picked) + "。"
    return (" ".join(picked) + ".").capitalize()


def _body(rng: random.Random, count: int, chinese: bool, prefix: str) -> list[Block]:
    words = _ZH if chinese else _EN
    blocks: list[Block] = []
    for n in range(count):
        block_id = f"{prefix}_{n:04d}"
        if n % 25 == 0:
            blocks.append(
                {
                    "id": block_id,
                    "type": "heading",
                    "text": _sentence(rng, words, chinese)[:40],
                    "props": {"level": 2},
                }
            )
        elif n % 7 == 3:
            blocks.append(
                {
                    "id": block_id,
                    "type": "todo",
                    "text": _sentence(rng, words, chinese),
                    "props": {"checked": n % 2 == 0},
                }
            )
        elif n % 5 == 1:
            blocks.append({"id": block_id, "type": "bulleted_list", "text": _sentence(rng, words, chinese)})
        else:
            blocks.append({"id": block_id, "type": "paragraph", "text": _sentence(rng, words, chinese)})
    return blocks


def _para(block_id: str, text: str) -> Block:
    return {"id": block_id, "type": "paragraph", "text": text}


def _heading(block_id: str, text: str) -> Block:
    return {"id": block_id, "type": "heading", "text": text, "props": {"level": 2}}


def _todo(block_id: str, text: str) -> Block:
    return {"id": block_id, "type": "todo", "text": text, "props": {"checked": False}}


def special_pages(rng: random.Random) -> list[Page]:
    """The pages the tasks act on, among ordinary ones."""
    minutes = _body(rng, 1_000, False, "min")
    minutes[617] = _para(
        "min_0617", f"Action: finance will {MISSPELT} the signed contract by Friday and file it."
    )
    return [
        Page(
            "doc_billing",
            "Billing service plan",
            [
                _heading("bil_0", "Timeline"),
                *_body(rng, 6, False, "bil_a"),
                _para("bil_cut", CUTOVER),
                *_body(rng, 6, False, "bil_b"),
            ],
        ),
        Page(
            "doc_zhifu",
            "支付系统方案",
            [
                _heading("zf_0", "时间安排"),
                *_body(rng, 6, True, "zf_a"),
                _para("zf_cut", CUTOVER_ZH),
                *_body(rng, 6, True, "zf_b"),
            ],
        ),
        Page(
            "doc_onboarding",
            "Team onboarding checklist",
            [
                _heading("onb_0", "First week"),
                *[
                    _todo(f"onb_{n}", t)
                    for n, t in enumerate(
                        [
                            "Get a laptop and accounts",
                            "Meet your buddy",
                            "Read the engineering handbook",
                            "Ship a small change",
                            "Join the on-call rotation as a shadow",
                        ],
                        start=1,
                    )
                ],
            ],
        ),
        Page(
            "doc_launch",
            "Launch checklist",
            [
                _heading("lau_0", "Before launch"),
                _todo("lau_1", "Freeze the release branch"),
                _todo("lau_2", "Write the announcement"),
                _todo("lau_3", "Brief the support team"),
            ],
        ),
        Page(
            "doc_sprint", "Sprint board", [_heading("spr_0", "To do"), _todo("spr_1", "Triage the open bugs")]
        ),
        Page(
            "doc_weekly",
            "Weekly plan",
            [
                _heading("wk_0", "This week"),
                _todo("wk_1", "Review the hiring pipeline"),
                _para("wk_2", "Status: draft, to be discussed on Thursday."),
            ],
        ),
        Page(
            "doc_nimbus",
            "Project Nimbus charter",
            [
                _heading("nim_0", "Purpose"),
                *_body(rng, 8, False, "nim"),
            ],
        ),
        Page(
            "doc_review",
            "Quarterly review",
            [
                _heading("rev_s", "Summary"),
                _para("rev_s1", "Revenue grew eleven percent."),
                _para("rev_s2", "Churn fell for the third quarter in a row."),
                _heading("rev_r", "Risks"),
                _para("rev_r1", "Two vendors are late on security reviews."),
                _para("rev_r2", "Hiring is behind plan in support."),
                _heading("rev_n", "Next steps"),
                _para("rev_n1", "Close the vendor reviews by October."),
                _para("rev_n2", "Open four support roles."),
                _para("rev_n3", "Present the plan to the board."),
            ],
        ),
        Page(
            "doc_style",
            "Style guide",
            [
                _heading("sty_0", "Headings"),
                _para("sty_1", COLOUR),
                *_body(rng, 10, False, "sty"),
            ],
        ),
        Page("doc_minutes", "Meeting minutes 2026", minutes),
        Page("doc_requirements", "产品需求汇总", _body(rng, 500, True, "req")),
        Page("doc_research", "Research log", _body(rng, 2_000, False, "res")),
    ]


def corpus(seed: int = 22) -> list[Page]:
    """200 pages: the special ones, then ordinary English and Chinese pages to 100 of each."""
    rng = random.Random(seed)
    pages = special_pages(rng)
    english = sum(1 for page in pages if page.title.isascii())
    chinese = len(pages) - english
    for n in range(100 - english):
        topic = " ".join(rng.choice(_EN) for _ in range(2)).title()
        pages.append(
            Page(f"doc_en_{n:03d}", f"{topic} notes {n}", _body(rng, rng.randint(6, 20), False, f"en{n}"))
        )
    for n in range(100 - chinese):
        topic = rng.choice(_ZH) + rng.choice(_ZH)
        pages.append(
            Page(f"doc_zh_{n:03d}", f"{topic}笔记 {n}", _body(rng, rng.randint(6, 20), True, f"zh{n}"))
        )
    assert len(pages) == PAGES and len({page.title for page in pages}) == PAGES
    return pages


def seed_mnote(db: Path, pages: list[Page]) -> None:
    fixture = {
        "workspaces": [
            {
                "id": WORKSPACE,
                "name": "Notes",
                "members": [{"actorId": ACTOR, "role": "owner"}],
                "pages": [{"id": page.id, "title": page.title, "blocks": page.blocks} for page in pages],
            }
        ]
    }
    store = open_store(db)
    try:
        load_fixture(store, fixture)
    finally:
        store.close()


def write_files(folder: Path, pages: list[Page]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for page in pages:
        (folder / f"{page.title}.md").write_text(page.markdown(), encoding="utf-8")
