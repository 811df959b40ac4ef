#!/usr/bin/env python3
"""Regenerate docsum's sample documents and their question set.

The folder holds eight short documents about Larkspur Valley, a fictional
small town, written for this project: three .txt, three .md and two .pdf
files, plus QUESTIONS.jsonl (questions with known answers and the documents
that hold them). Several answers need two documents read together, which is
what a summary-first question-answering tool has to get right.

Standard library only: the PDFs come from the tiny PDF 1.4 writer below, so
regenerating needs neither pypdf nor reportlab. The output is byte-identical
on every run (no timestamps, no random ids), so a rerun never shows up as a
change in version control.

Usage:  python sample_data/make_samples.py
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent
# The documents live in their own folder so `docsum build sample_data/docs`
# indexes them and not this script, the README or the questions.
DOCS_DIR = OUT_DIR / "docs"

# ---------------------------------------------------------------------------
# text helpers
# ---------------------------------------------------------------------------


def _blocks(source: str) -> list[str]:
    """Split dedented source into blocks at blank lines.

    Prose paragraphs are written wrapped in this file for readability; they
    are joined back into one line here. Headings, list items and table rows
    keep their own lines because their line breaks carry meaning.
    """
    out: list[str] = []
    for raw in textwrap.dedent(source).strip().split("\n\n"):
        lines = [ln.rstrip() for ln in raw.strip("\n").split("\n")]
        is_markup = all(ln.lstrip().startswith(("#", "- ", "|", "* ")) for ln in lines)
        # A block of only short lines is a letterhead or a signature, not prose.
        is_short = len(lines) > 1 and all(len(ln) < 60 for ln in lines)
        if is_markup or is_short:
            out.append("\n".join(lines))
        else:
            out.append(" ".join(ln.strip() for ln in lines))
    return out


def as_markdown(source: str) -> str:
    # One paragraph per line: Markdown renders it the same and diffs stay clean.
    return "\n\n".join(_blocks(source)) + "\n"


def as_plain_text(source: str, width: int = 76) -> str:
    # Plain-text reports are hard-wrapped, as a typewriter-era office would.
    parts: list[str] = []
    for block in _blocks(source):
        if "\n" in block or len(block) <= width:
            parts.append(block)
        else:
            parts.append(textwrap.fill(block, width=width, break_long_words=False, break_on_hyphens=False))
    return "\n\n".join(parts) + "\n"


# ---------------------------------------------------------------------------
# minimal PDF 1.4 writer
# ---------------------------------------------------------------------------

PAGE_W, PAGE_H = 595, 842  # A4 in points
MARGIN_X, TOP_Y, BOTTOM_Y = 56, 790, 56
BODY_SIZE, BODY_LEADING = 10, 13.5
HEAD_SIZE, HEAD_LEADING = 14, 20
WRAP = 90  # characters per body line; Helvetica 10 pt at 90 chars fits the text width


def _pdf_string(text: str) -> bytes:
    """A PDF literal string in WinAnsi (cp1252) with bytes above 126 octal-escaped.

    Escaping keeps the file pure ASCII; encoding to cp1252 fails loudly for a
    character Helvetica's WinAnsi encoding cannot show, rather than writing a
    PDF that extracts as garbage.
    """
    out = bytearray(b"(")
    for byte in text.encode("cp1252"):
        if byte in (0x28, 0x29, 0x5C):  # ( ) \ must be escaped inside (...)
            out += b"\\" + bytes([byte])
        elif byte < 32 or byte > 126:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b")")


def _page_stream(blocks: list[str]) -> bytes:
    """Content stream for one page: headings in bold, paragraphs wrapped."""
    ops: list[bytes] = [b"BT"]
    y = float(TOP_Y)
    for block in blocks:
        if block.startswith("#"):
            font, size, leading = b"/F2", HEAD_SIZE, HEAD_LEADING
            lines = [block.lstrip("#").strip()]
        else:
            font, size, leading = b"/F1", BODY_SIZE, BODY_LEADING
            lines = []
            for ln in block.split("\n"):
                lines += textwrap.wrap(ln, WRAP, break_long_words=False, break_on_hyphens=False) or [""]
        ops.append(b"%s %d Tf" % (font, size))
        for ln in lines:
            if y < BOTTOM_Y:
                raise ValueError(f"page overflows; move text to another page: {ln[:40]!r}")
            # Absolute text matrix per line: simple, and pypdf sees each
            # line as a new line because y changes.
            ops.append(b"1 0 0 1 %d %s Tm %s Tj" % (MARGIN_X, f"{y:.1f}".encode(), _pdf_string(ln)))
            y -= leading
        y -= BODY_LEADING * 0.6  # paragraph gap
    ops.append(b"ET")
    return b"\n".join(ops) + b"\n"


def build_pdf(title: str, pages: list[list[str]]) -> bytes:
    """Assemble a PDF 1.4 file with exact xref offsets and an /Info /Title."""
    n_pages = len(pages)
    # Fixed object numbers: 1 catalog, 2 page tree, 3-4 fonts, 5 info, then
    # (page, content) pairs. Knowing them up front lets /Kids be written first.
    page_ids = [6 + 2 * i for i in range(n_pages)]
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [%s] /Count %d >>"
        % (b" ".join(b"%d 0 R" % p for p in page_ids), n_pages),
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        4: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
        5: b"<< /Title %s /Producer (docsum sample_data/make_samples.py) >>" % _pdf_string(title),
    }
    for pid, blocks in zip(page_ids, pages):
        stream = _page_stream(blocks)
        objects[pid] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] "
            b"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents %d 0 R >>" % (PAGE_W, PAGE_H, pid + 1)
        )
        objects[pid + 1] = b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"endstream"

    return assemble_pdf(objects, " /Info 5 0 R")


def assemble_pdf(objects: dict[int, bytes], trailer_extra: str = "") -> bytes:
    """A PDF file of numbered `objects` (1 is the catalog) with a correct xref
    table; `trailer_extra` goes into the trailer dictionary (the tests build
    their hand-made PDFs with this too)."""
    # The binary comment line tells transfer tools the file is not text.
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for num in sorted(objects):
        offsets[num] = len(out)
        out += b"%d 0 obj\n" % num + objects[num] + b"\nendobj\n"
    xref_at = len(out)
    size = max(objects) + 1
    out += b"xref\n0 %d\n" % size
    out += b"0000000000 65535 f \n"  # every xref entry is exactly 20 bytes
    for num in range(1, size):
        out += b"%010d 00000 n \n" % offsets[num]
    out += f"trailer\n<< /Size {size} /Root 1 0 R{trailer_extra} >>\nstartxref\n{xref_at}\n%%EOF\n".encode()
    return bytes(out)


# ---------------------------------------------------------------------------
# the documents
# ---------------------------------------------------------------------------

STORM_REPORT = """
    LARKSPUR VALLEY EMERGENCY COORDINATION OFFICE

    POST-EVENT REPORT: STORM WREN, 17-18 OCTOBER 2022

    Prepared by: Ines Calloway, duty coordinator
    Date of report: 7 November 2022
    Distribution: council, utilities, volunteer services

    1. SUMMARY

    Storm Wren crossed the valley from the south-west between the morning of
    Monday 17 October and the early afternoon of Tuesday 18 October 2022. It
    was the wettest single event recorded at the Tansy Hollow rain gauge since
    the gauge was installed. No one was killed or seriously hurt. The storm
    caused river flooding on Mill Lane, a washout on the railway, a four-day
    boil-water notice, a long power cut, damage to the library building site
    and heavy losses for local beekeepers. This report sets out what happened,
    what each service did, and what we recommend before next autumn.

    2. RAINFALL AND WIND

    The Tansy Hollow gauge, which sits beside the reservoir spillway, recorded
    142 mm of rain in 30 hours, from 06:00 on 17 October to 12:00 on 18 October.
    More than half of that total, 77 mm, fell in the nine hours before dawn on
    the 18th. The strongest gust, 104 km/h, was measured at Ashford Junction at
    23:40 on 17 October. Winds in the valley itself were lower but brought down
    at least forty trees, most of them along Larch Ridge Road.

    3. RIVER FLOODING

    The Tansy River at the Mill Bridge gauge rose above its flood stage of
    3.0 m shortly after midnight and peaked at 3.71 m at 04:15 on 18 October.
    Fourteen homes on Mill Lane had water on their ground floors. Volunteer
    firefighters moved twenty-six residents to the Grange Hall, which stayed
    open as a rest centre for two nights. The water had fallen below flood
    stage by 15:00 on the 18th.

    4. DRINKING WATER

    Run-off carried silt into the reservoir and turbidity at the Larkspur
    Valley Water Cooperative's intake rose to 38 NTU, well beyond what the
    treatment works could handle. The cooperative issued a boil-water notice at
    09:00 on 18 October and lifted it at 17:00 on 22 October after four days of
    clean test results. Bottled water was handed out from the station forecourt
    on 18 and 19 October.

    5. RAILWAY

    On the Larkspur and Ashford line, flood water overtopped Culvert 14 at
    kilometre 9.4 and washed the ballast out from under 22 metres of track. A
    track walker found the damage at 06:30 on 18 October and the line was
    closed at once. Volunteers and a hired contractor built a temporary repair
    and the line reopened on 27 October, nine days later. The Trust has told us
    that a permanent rebuild of the culvert will follow over the winter.

    6. POWER

    About 2,300 customers lost electricity when a falling pine broke a feeder
    line on Larch Ridge Road at 00:50 on 18 October. Supply was restored after
    eleven hours.

    7. HOLLIS MEMORIAL LIBRARY

    The library has been closed for renovation since July. At about 01:00 on 18
    October the temporary roof membrane over the east wing tore in the wind and
    rain came into the room where the collection was being stored. In all, 1,900
    books were water-damaged. The library staff and fourteen volunteers moved the
    wet books to a refrigerated truck within the day; 1,240 of them were later
    saved by freeze-drying at a specialist facility in Ashford. The contractor
    has fitted a stronger membrane. The council has asked the architects to
    report on what the damage means for the renovation timetable.

    8. BEEKEEPING

    The Larkspur Valley Beekeepers' Society lost 31 hives at its riverside
    apiary below Mill Bridge, which lies inside the area that flooded. Some
    hives were swept downstream and were never found. The society's other
    apiaries, on higher ground, came through with minor damage.

    9. RECOMMENDATIONS

    - Fit a water-level alarm at Culvert 14 that reports to the railway control office.
    - Ask the water cooperative to install continuous turbidity monitoring at the intake.
    - Keep a stock of bottled water for 1,500 people at the Grange Hall.
    - Advise the beekeepers' society not to keep hives below the Mill Bridge flood line.
    - Require storm-rated temporary roofing on public building sites from September to March.

    Ines Calloway
    Duty coordinator
"""

RAIL_MINUTES = """
    LARKSPUR AND ASHFORD RAILWAY TRUST

    MINUTES OF THE BOARD MEETING

    Held on Wednesday 2 October 2019 at 19:00 in the meeting room, Larkspur Station.

    Present: Gideon Farrow (chair), Lucia Pennant (treasurer), Wendell Osei
    (secretary), Marisol Quint (operations), Henry Abeyta (permanent way).
    Apologies: Dora Finchley.

    1. MINUTES OF THE LAST MEETING

    The minutes of the meeting of 4 September 2019 were approved without change.

    2. REPORT ON THE SURPLUS AUCTION

    The treasurer reported on the surplus auction held on Saturday 14 September
    2019 in the Larkspur goods shed. The auction cleared equipment left over
    from the closure of the depot canteen and from the signal box refit. 52 lots
    were offered and 49 were sold. Gross takings were $11,940. After the
    auctioneer's fee of $640 the Trust received $11,300, which the board agreed
    to place in the re-sleepering fund.

    Notable lots: Lot 12, a set of six brass platform lamps, sold for $420.
    Lot 37, the Vandermolen double-deck steam-tube oven from the depot canteen,
    built around 1954 and still in working order, sold for $1,850 to a local
    trader. The buyer collected it within the 14 days allowed, on 21 September.
    Lot 44, a cast-iron platform bench, sold for $300. The three unsold lots
    were two filing cabinets and a broken ticket printer; they will go to
    scrap.

    The chair thanked the volunteers who ran the viewing day and the tea stall,
    which raised a further $186 for the Trust.

    3. PERMANENT WAY

    Henry Abeyta reported that 1,200 sleepers between kilometre 7 and
    kilometre 11 are due for replacement. Work is planned for January and
    February 2020, when no trains run. His inspection of the culverts found
    scour at the downstream apron of Culvert 14, at kilometre 9.4. It is not
    urgent but it is to be checked after every heavy rain and reported to the
    board.

    4. LOCOMOTIVES AND ROLLING STOCK

    Marisol Quint reported that locomotive No. 4 "Heron" ran every service day
    in September. Its boiler certificate expires in March 2021 and a full
    overhaul will be needed. The board asked her to get two quotes before the
    December meeting. The second carriage has new seat covers sewn by members
    of the Friends group.

    5. PASSENGER NUMBERS

    The secretary reported 18,450 passenger journeys in the 2019 season to the
    end of September, up from 17,020 at the same point last year. The Sunday
    afternoon trains were full on most weekends in August. The board agreed to
    keep four return trips a day for the 2020 season over the full 23.6 km from
    Larkspur to Ashford Junction.

    6. ANY OTHER BUSINESS

    The secretary has received a letter from the Hollis Memorial Library asking
    whether the Trust would lend old timetables and photographs for an
    exhibition. The board agreed in principle.

    The next meeting will be held on Wednesday 6 November 2019.

    The meeting closed at 20:35.

    Signed: Wendell Osei, secretary
"""

BEE_NEWSLETTER = """
    THE SMOKER

    Newsletter of the Larkspur Valley Beekeepers' Society
    Autumn 2023, issue 131

    FROM THE CHAIR

    A year ago I wrote this column in the week after Storm Wren, when we had
    just counted our losses at the Mill Bridge riverside apiary. Thirty-one
    hives were gone, some of them carried away by the river. I am glad to
    write now that the society has more hives than it has ever had. At the
    September count our members kept 212 hives between them. That recovery is
    thanks to everyone who split strong colonies in the spring, and to the
    members who gave nucleus colonies to those who had lost everything. We
    have given up the Mill Bridge site for good.

    -- Hattie Lindqvist, chair

    THE 2023 HARVEST

    Members reported a total harvest of 3,420 kg of honey this year, against
    2,610 kg in 2022. The spring flow was late because of the cold April, but
    the lime trees along Station Road and the clover on the reservoir slopes
    made up for it in June and July. The heather honey from Larch Ridge was
    light this year, about 190 kg in all.

    EAST MEADOW APIARY

    The East Meadow above Tansy Hollow Reservoir is now our largest site, with
    40 hives. The land belongs to the water cooperative, which renewed our lease
    this spring. Please keep the gate on the meadow track shut: the
    cooperative's staff use the track to reach the dam, and they have asked us
    to leave the turning space in front of the gate clear. Hives must stay
    inside the fenced area, at least 30 metres from the footpath used by
    walkers on the Reservoir Loop.

    TREASURER'S REPORT

    Our treasurer, Agnes Wu, reports that the society has 64 paid-up members,
    seven of them new this year. The annual subscription stays at $25. The
    honey fair made a surplus of $2,310, which will pay for a second extractor
    to be kept at the East Meadow shed. Agnes keeps 18 of the 40 East Meadow
    hives herself and has offered to show any new member how she manages
    swarm control with so many colonies on one site.

    HONEY FAIR

    The honey fair on Saturday 16 September filled Station Square from ten
    until four. We counted about 1,150 visitors. Best in show went to Ravi
    Castellanos for his heather honey; the prize for the best beeswax candle
    went to eleven-year-old Juno Petrakis. Thank you to the railway for the
    loan of their trestle tables.

    VARROA

    Treat your colonies now if you have not already done so. Mite counts in
    August were higher than last year at every site we sampled. Oxalic acid
    treatment in the broodless period in December is strongly advised. Record
    what you use in the treatment book kept at the East Meadow shed.

    DATES FOR YOUR DIARY

    - Thursday 9 November 2023: winter talk, "Feeding colonies through a long winter", Grange Hall, 19:30.
    - Thursday 18 January 2024: annual general meeting, Grange Hall, 19:30.
    - Saturday 2 March 2024: hive-building workshop, East Meadow shed, 10:00.

    Secretary: Tomasz Ilves. Items for the winter issue by 1 December, please.
"""

COOP_REPORT = """
    # Larkspur Valley Water Cooperative: Annual Report 2023

    Presented to members at the annual meeting on Saturday 25 November 2023,
    Grange Hall, Larkspur. 143 members attended in person.

    ## From the chair

    Sixty-one years after 87 households clubbed together to pipe water down
    from the Tansy valley, the cooperative still belongs to the people who
    drink its water. This year we finished the largest project since the dam
    itself, kept our promise on prices, and put right what Storm Wren taught
    us. I thank our general manager, Odile Feraday, her staff of nine, and the
    volunteers who read meters and walk the catchment every month.

    -- Rupert Okonkwo-Hale, chair of the board

    ## Membership

    At 31 December 2023 the cooperative had 1,146 member households, up from
    1,118 a year earlier. Most of the new members live in the houses built on
    the old brickworks site on Station Road. Every member household has one
    vote at the annual meeting, however much water it uses.

    ## Water delivered and prices

    We delivered 412,000 cubic metres of treated water in 2023, about one per
    cent more than in 2022. The volume charge rose on 1 January 2023 from $1.98 to
    $2.15 per cubic metre to pay for the new filter. The board has decided
    that the charge will not rise again in 2024.

    ## Filter No. 3

    Our third slow-sand filter was commissioned on 9 August 2023. It cost
    $612,000, of which $150,000 came from reserves and the rest from a
    fifteen-year loan. It adds 1,800 cubic metres a day of treatment capacity,
    so that we can now take one filter out of service for cleaning in summer
    without asking members to cut back.

    ## After Storm Wren

    The boil-water notice of October 2022 lasted four days and was the first in
    the cooperative's history. Since then we have fitted a continuous turbidity
    monitor at the intake, linked to an alarm in the manager's office, and
    moved the intake screen 40 cm higher. We also now keep 2,000 litres of
    bottled water in the Grange Hall store, as the emergency office advised.

    ## Community fund

    Each year fifteen per cent of the previous year's surplus goes to the
    community fund, and money it does not spend is carried forward. In 2023
    the fund gave $40,000 to the renovation of the Hollis Memorial Library for
    its new children's room, which the library has named the Reservoir Room,
    and $3,500 to the primary school for its garden project.

    ## East Meadow lease

    The Larkspur Valley Beekeepers' Society's lease on the East Meadow, above
    the reservoir, was renewed on 1 March 2023 for five years. The rent has not
    changed since the first lease in 1986: one 450 g jar of honey for every hive
    kept on the meadow, delivered to the annual meeting each November. The jars
    are raffled among the members present. Bees on the meadow do no harm to the
    water, and the clover they work is better for the slopes of the dam than
    the rough grass it replaced.

    ## Finances in brief

    | Item | 2023 | 2022 |
    | --- | --- | --- |
    | Income from water charges | $885,800 | $807,000 |
    | Connection and other fees | $134,200 | $121,500 |
    | Operating costs | $742,000 | $706,300 |
    | Surplus | $278,000 | $222,200 |

    The full audited accounts are available from the office on Mill Lane.
"""

BAKERY_HISTORY = """
    # Brindle & Daughter: thirty years on Quarry Street

    *A short history written for the bakery's thirtieth birthday in 2024.*

    ## A saddlery becomes a bakery

    Marguerite Brindle opened the bakery at 12 Quarry Street in April 1994, in
    the front room of what had been Tolley's saddlery. She had trained in a
    hotel kitchen in Ashford and wanted a shop where she could bake bread the
    slow way, with long fermentation and not much else. In the first year she
    sold little but white tin loaves and currant buns, and she sold out most
    days by eleven.

    Her daughter Pia started washing trays there at fourteen. After three years
    at a bakery school and two in a large city bakery, Pia came home, and in
    2016 the sign over the door was repainted to read Brindle & Daughter. Today
    the bakery employs seven people and opens Tuesday to Saturday, from 7:00
    to 15:00.

    ## The oven from the railway

    In the summer of 2019 the bakery's electric deck oven failed for the third
    time in a month. A new one would have cost more than the bakery earned in a
    good year. Then Pia saw a notice in the station window: the Larkspur and
    Ashford Railway was selling off the equipment from its depot canteen at a
    surplus auction. Among the lots was the canteen's oven, a great iron
    Vandermolen steam-tube oven that had baked bread and pies for railway
    workers since the 1950s.

    Marguerite went to the auction with a firm limit in her head and came home
    as the owner of the oven. She has never told anyone what she paid. "The
    railway writes everything down in its minutes," she says, "so anyone who
    is that curious can go and read them."

    Moving the oven took two days, a borrowed flatbed truck and eleven
    neighbours. It had to be taken apart into four sections to pass through the
    bakery's back door. An engineer from Ashford, Sol Baptiste, spent three
    weeks on new seals, a new burner and a thermostat, and the first bake came
    out on 3 November 2019. The oven holds 96 loaves at once across its two
    decks, and it keeps a steady heat in a way that the electric oven never
    did.

    ## Depot Rye

    To celebrate the oven's arrival Pia created the loaf that has since become
    the bakery's best seller: Depot Rye, a dark rye loaf sweetened with honey
    and named after the oven's first home. The honey comes from Agnes Wu's
    hives on the East Meadow above the reservoir, about 30 kg of it each month.
    Agnes brings it down herself every first Monday, in old railway milk cans
    she found at the same auction. On Saturdays the bakery bakes 140 Depot Rye
    loaves, and they are usually gone by noon.

    ## Hard times and good neighbours

    The bakery has had its bad weeks. During the boil-water notice after Storm
    Wren in October 2022 the team baked with bottled water for four days, and
    customers carried crates of it up Quarry Street to help. In April 2023,
    when the council resurfaced Quarry Street, the front door was blocked for
    two weeks and customers came in through the back lane, past the oven.

    ## Thirty years

    Marguerite still comes in at four most mornings to shape the first loaves.
    Asked what has changed in thirty years, she points at the oven. "It is
    older than I am," she says, "and it still works harder than any of us."
"""

WALKING_GUIDE = """
    # The Reservoir Loop

    *A walking guide from the Larkspur Ramblers. Distance 7.2 km, total ascent
    190 m, about two and a half hours at an easy pace.*

    The Reservoir Loop is the walk we recommend to every visitor. It starts and
    ends at the railway station, climbs to the dam at Tansy Hollow, and comes
    back along Larch Ridge with the whole valley below you. The paths are good
    but the climb to the dam is steep in places. Wear proper shoes and carry
    water: there is no tap on the route after the station.

    ## 1. Larkspur Station to Mill Bridge (1.4 km)

    Leave the station forecourt by the gate beside the goods shed and turn left
    up Station Road. At the crossroads, go straight on into Quarry Street. If
    you set off early you can buy a loaf at the bakery on the right, where the
    smell of baking reaches the street by half past seven. At the end of Quarry
    Street, turn right down Mill Lane to Mill Bridge.

    Look at the wall of the last house before the bridge. A small brass plate
    marks how high the river came during Storm Wren. On the far bank, a white
    post carries the river gauge that the flood warnings are based on. From the
    middle of the bridge, look downstream: the low meadow on the right, below
    the flood line, once held an apiary. It has stood empty since the storm.

    ## 2. Along the Tansy River (2.1 km)

    Cross the bridge and take the path that follows the river upstream. This
    is the easiest part of the walk and the best place to see herons and, in
    spring, dippers on the stones. Pass the weir and the old mill race, and
    the path starts to climb through birch woods.

    ## 3. Up to Tansy Hollow Dam (1.3 km)

    The climb is short but steep, with wooden steps in two places. At the top
    you come out on the crest of the dam. The dam is an earth embankment,
    completed in 1964. It stands 31 metres high and its crest is 240 metres
    long. You may walk along the crest, but keep off the grass slopes, which
    are grazed and mown to protect the embankment. The reservoir behind it
    supplies the whole valley with drinking water; swimming and boating are
    not allowed.

    ## 4. East Meadow and Larch Ridge (1.6 km)

    From the far end of the crest, follow the signed path across the East
    Meadow. In summer the meadow is full of clover and you will hear the hives
    before you see them. The beekeepers ask walkers to stay on the path, which
    keeps well away from the fenced apiary, and to close the gate on the meadow
    track behind them. From the top of the meadow the path joins Larch Ridge,
    the highest point of the walk, with views over the town and, on a clear
    day, the line of the railway running down towards Ashford.

    ## 5. Back to the station (0.8 km)

    Follow Larch Ridge Road downhill; the bank on the left was cleared of
    fallen trees after the storm and has been replanted with young oaks. At the
    bottom, turn right into Station Road and you are back at the start. Trains
    run on summer weekends if you would like to extend the day with a ride.

    ## Good to know

    - Dogs must be on a lead on the dam and across the East Meadow.
    - The path by the river can flood after heavy rain; use Mill Lane and the road to the dam instead.
    - The library on Station Road has a free leaflet with a map of this walk.
    - Please take your litter home.
"""

LIBRARY_FACT_SHEET = """
    # Hollis Memorial Library: Renovation Fact Sheet

    The Hollis Memorial Library on Station Road was built in 1931 with money left to the town
    by Eleanor Hollis, a textile merchant, and it had not been substantially altered since.
    The renovation that finished in 2023 is the first full refurbishment in its history. This
    sheet gives the main facts for visitors, members and the press.

    Design and building. The renovation was designed by the architects Quell & Marsh and
    carried out by Tannery Row Builders. Work on site began on 4 July 2022. The library
    stayed closed for the whole of the works, and a small lending service ran from a room at
    the Grange Hall.

    Cost and funding. The total budget was $1.46 million. The town council paid $900,000, a
    state heritage grant paid $520,000, and the Larkspur Valley Water Cooperative's community
    fund gave $40,000 towards the new children's room.

    What is new. A lift now reaches both floors, so the upstairs reading room is open to
    everyone for the first time. The 1931 glass skylight over the main hall has been taken
    apart, cleaned and releaded. An 18 kW solar array on the south roof supplies most of the
    building's electricity. There are 24 study seats with power points, and the children's
    area has moved into its own room, the Reservoir Room, named to thank the cooperative.

    Schedule. The library was due to reopen on 11 March 2023. During Storm Wren in October
    2022 the temporary roof over the east wing failed, part of the stored collection was
    damaged, and the east wing had to be dried out and partly re-plastered before work
    could continue. The library reopened on Saturday 3 June 2023, twelve weeks later than
    planned.

    The collection. The library holds about 38,500 items, including the town's local
    history archive. Many of the books damaged in the storm were saved, and those that
    could not be saved have been replaced with help from the Friends of the Library.

    Opening hours. Tuesday to Friday 10:00 to 18:00, Saturday 9:00 to 13:00.

    Head librarian: Constance Adeyemi.
"""

BULLETIN_PAGES = [
    """
    # Council Bulletin, Spring 2023: From the Mayor

    Dear residents,

    Winter is behind us and the valley is busy again. The council has now set its budget
    for 2023-24 at $8.9 million, an increase of three per cent, most of which goes to road
    repairs and to the costs left behind by Storm Wren last October. I want to thank once
    more the volunteers who sandbagged Mill Lane, ran the rest centre at the Grange Hall,
    and carried water to neighbours who could not fetch it themselves.

    Roads. Quarry Street will be resurfaced in April. The work will take about two weeks.
    The shops on Quarry Street will stay open throughout, with entrances through the back
    lane where the front doors are blocked. Please support them while the diggers are in.

    Council. We welcome our newest councillor, Bastian Oyelaran, elected unopposed for the
    Station ward in February. Council meetings remain on the second Tuesday of each month at
    19:00 in the council chamber, and residents are welcome to attend and to ask questions
    in the first fifteen minutes.

    Waste. The green-waste collection returns on 3 April and will run fortnightly until the
    end of October. Bins must be at the kerb by 7:00 on collection day.

    With best wishes for the spring,

    Delphine Achterberg, Mayor of Larkspur Valley
    """,
    """
    # The Railway Season 2023

    The Larkspur and Ashford Railway Trust opens its 2023 season on Saturday 1 April. Trains
    run on Saturdays and Sundays until Sunday 29 October, with extra weekday trains during
    the school summer holidays. There are four return trips each service day, leaving
    Larkspur at 10:00, 12:00, 14:00 and 16:00.

    Fares for 2023. Adult return $14. Child return (5 to 15) $6. Family return (two adults
    and up to three children) $34. Children under five travel free. Tickets are sold at the
    station booking office and on the train; cards are accepted.

    Culvert 14. After the temporary repair made in the days after Storm Wren, the Trust has
    rebuilt Culvert 14 at kilometre 9.4 with a new concrete box culvert twice the size of
    the old one. The work was finished on 20 February 2023 and cost $286,000, of which 70
    per cent came from the state rail heritage fund. A water-level alarm now sends a message
    to the control office if the stream rises.

    Heron is back. Locomotive No. 4, "Heron", returns to service this season after a
    two-year boiler overhaul and will haul most of the weekend trains.

    Volunteers wanted. The Trust needs ticket inspectors, buffet staff and track workers.
    No experience is needed; training is given. Call in at the booking office.
    """,
    """
    # Water: Prices, Filter No. 3 and Summer Rules

    A message from the Larkspur Valley Water Cooperative.

    Prices. From 1 January 2023 the volume charge is $2.15 per cubic metre, up from $1.98.
    Members agreed the increase at the last annual meeting to pay for the third filter.

    Filter No. 3. Building work on the new slow-sand filter next to the treatment works is
    going well. We expect to bring it into service in the summer. While the work continues,
    please keep out of the fenced site on Mill Lane.

    Summer rules. The cooperative watches the level of Tansy Hollow Reservoir every day.
    If the reservoir falls below 60 per cent of its capacity, stage 1 restrictions begin:
    garden hoses and sprinklers may not be used between 8:00 and 20:00. If it falls below
    45 per cent, stage 2 restrictions begin and no hoses may be used at all. Watering cans
    are always allowed. The current level is posted each Monday on the board outside the
    cooperative's office.

    Leaks. If you see water running in the street, please call the office on Mill Lane. A
    single broken pipe can lose more water in a day than fifty households use.
    """,
    """
    # What's On: Spring and Summer 2023

    Spring clean-up day. Saturday 22 April, meeting at 9:00 at the Grange Hall. Gloves, bags
    and litter pickers are provided, and the council provides lunch for everyone who helps.

    Library. The renovation of the Hollis Memorial Library is nearly finished. It now
    expects to reopen in early summer; the head librarian will announce the date and the
    plans for the opening day in the next bulletin.

    Honey fair. The beekeepers' honey fair returns to Station Square on Saturday 16
    September, from 10:00 to 16:00, with honey tasting, candle making, an observation hive
    and a competition for the best honey in the valley.

    Summer concerts. The town band plays on the Station Square bandstand on the first
    Sunday of June, July and August at 15:00. Bring a chair.

    Ramblers. The Larkspur Ramblers lead a guided walk of the Reservoir Loop on the last
    Sunday of every month, starting at the station at 10:00. Walks are free and everyone
    is welcome.

    Market. The farmers' market moves back to Station Square from 6 May and runs every
    Saturday morning until the end of September.
    """,
]


def _pdf_pages(sources: list[str]) -> list[list[str]]:
    pages: list[list[str]] = []
    for src in sources:
        # PDF paragraphs are reflowed from the source and re-wrapped at WRAP.
        pages.append(_blocks(src))
    return pages


DOCUMENTS: dict[str, bytes] = {
    "storm_wren_incident_report.txt": as_plain_text(STORM_REPORT).encode("utf-8"),
    "railway_trust_minutes_2019-10.txt": as_plain_text(RAIL_MINUTES).encode("utf-8"),
    "beekeepers_newsletter_autumn_2023.txt": as_plain_text(BEE_NEWSLETTER).encode("utf-8"),
    "water_cooperative_annual_report_2023.md": as_markdown(COOP_REPORT).encode("utf-8"),
    "brindle_and_daughter_bakery.md": as_markdown(BAKERY_HISTORY).encode("utf-8"),
    "reservoir_loop_walking_guide.md": as_markdown(WALKING_GUIDE).encode("utf-8"),
    "library_renovation_fact_sheet.pdf": build_pdf(
        "Hollis Memorial Library: Renovation Fact Sheet", _pdf_pages([LIBRARY_FACT_SHEET])
    ),
    "council_bulletin_spring_2023.pdf": build_pdf(
        "Larkspur Valley Council Bulletin, Spring 2023", _pdf_pages(BULLETIN_PAGES)
    ),
}

# Questions with answers a reader can check in the documents. gold_docs lists
# every document needed; for "multi" questions no single document suffices.
QUESTIONS: list[dict[str, object]] = [
    {
        "id": "q01",
        "question": "How many member households did the Larkspur Valley Water Cooperative have at the end of 2023?",
        "answer": "1,146 member households (up from 1,118 a year earlier).",
        "gold_docs": ["water_cooperative_annual_report_2023.md"],
        "kind": "single",
    },
    {
        "id": "q02",
        "question": "How much rain did the Tansy Hollow gauge record during Storm Wren, and over how long?",
        "answer": "142 mm in 30 hours (06:00 on 17 October to 12:00 on 18 October 2022).",
        "gold_docs": ["storm_wren_incident_report.txt"],
        "kind": "single",
    },
    {
        "id": "q03",
        "question": "Which architects designed the renovation of the Hollis Memorial Library?",
        "answer": "Quell & Marsh.",
        "gold_docs": ["library_renovation_fact_sheet.pdf"],
        "kind": "single",
    },
    {
        "id": "q04",
        "question": "Below what reservoir level do stage 1 water restrictions start, and what do they forbid?",
        "answer": "Below 60 per cent of capacity; garden hoses and sprinklers may not be used between 8:00 and 20:00.",
        "gold_docs": ["council_bulletin_spring_2023.pdf"],
        "kind": "single",
    },
    {
        "id": "q05",
        "question": "How tall is the Tansy Hollow dam, and when was it completed?",
        "answer": "31 metres high, completed in 1964.",
        "gold_docs": ["reservoir_loop_walking_guide.md"],
        "kind": "single",
    },
    {
        "id": "q06",
        "question": "How much did Brindle & Daughter pay for its oven, and on what date was the auction where it was bought?",
        "answer": "$1,850, at the Larkspur and Ashford Railway's surplus auction on Saturday 14 September 2019 (lot 37).",
        "gold_docs": ["brindle_and_daughter_bakery.md", "railway_trust_minutes_2019-10.txt"],
        "kind": "multi",
    },
    {
        "id": "q07",
        "question": "How many books were water-damaged when the library's temporary roof failed, and on what date did the library finally reopen?",
        "answer": "1,900 books were damaged (1,240 later saved); the library reopened on Saturday 3 June 2023.",
        "gold_docs": ["storm_wren_incident_report.txt", "library_renovation_fact_sheet.pdf"],
        "kind": "multi",
    },
    {
        "id": "q08",
        "question": "How many jars of honey does the water cooperative receive each year as rent for the East Meadow at the current number of hives?",
        "answer": "40 jars: the rent is one 450 g jar per hive kept on the meadow, and the East Meadow apiary has 40 hives.",
        "gold_docs": ["water_cooperative_annual_report_2023.md", "beekeepers_newsletter_autumn_2023.txt"],
        "kind": "multi",
    },
    {
        "id": "q09",
        "question": "Who supplies the honey for the bakery's Depot Rye, and what office does that person hold in the beekeepers' society?",
        "answer": "Agnes Wu, the society's treasurer (she keeps 18 of the 40 East Meadow hives).",
        "gold_docs": ["brindle_and_daughter_bakery.md", "beekeepers_newsletter_autumn_2023.txt"],
        "kind": "multi",
    },
    {
        "id": "q10",
        "question": "What did an adult return ticket cost in 2023 on the railway that sold Brindle & Daughter its oven?",
        "answer": "$14 (the Larkspur and Ashford Railway's 2023 adult return fare).",
        "gold_docs": ["brindle_and_daughter_bakery.md", "council_bulletin_spring_2023.pdf"],
        "kind": "multi",
    },
]


def questions_jsonl() -> bytes:
    # sort_keys off: the field order id, question, answer, gold_docs, kind
    # reads naturally; ensure_ascii off keeps "&" and quotes legible.
    lines = [json.dumps(q, ensure_ascii=False) for q in QUESTIONS]
    return ("\n".join(lines) + "\n").encode("utf-8")


def main() -> None:
    outputs = {DOCS_DIR / name: data for name, data in DOCUMENTS.items()}
    outputs[OUT_DIR / "QUESTIONS.jsonl"] = questions_jsonl()
    DOCS_DIR.mkdir(exist_ok=True)
    for path, data in outputs.items():
        name = path.relative_to(OUT_DIR)
        # Only rewrite on change, so file times stay put on an idempotent run.
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
            print(f"wrote {name} ({len(data)} bytes)")
        else:
            print(f"unchanged {name}")


if __name__ == "__main__":
    main()
