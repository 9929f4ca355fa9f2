# ruff: noqa: E501  (the notes are data: one session a line reads best)
"""Write SessionSight's synthetic data set: 6 invented patients x 8 progress notes.

Every name, date and event is invented for this pack (no real person's data). Each
patient has a course of treatment (what was said, the mood score, a scale, the risk
statement, interventions, homework); the note text is assembled in a common progress
note layout (DAP with a risk and mental status section).

    python scripts/sessionsight_notes.py   # rewrites src/tooldb/packs/sessionsight/data/
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

OUT = Path(__file__).parents[1] / "src" / "tooldb" / "packs" / "sessionsight" / "data"

PATIENTS = [
    {
        "patient_id": "P01",
        "name": "Maya Torres (synthetic)",
        "birth_year": 1991,
        "start": "2026-01-06",
        "scale": "GAD-7",
        "diagnoses": "Generalized anxiety disorder (F41.1); rule out major depressive disorder.",
        "sessions": [
            (
                4,
                15,
                "Reports constant worry about work deadlines and her father's health; sleeps 5 hours.",
                ["psychoeducation", "CBT"],
                "Denies SI/HI. History of SH in college, none since 2019.",
                "Worry log daily.",
                "Introduce cognitive restructuring.",
            ),
            (
                4,
                14,
                "Worry log shows most worry in the evening; catastrophizing about being fired.",
                ["CBT", "cognitive restructuring"],
                "Denies SI, HI, or self-harm.",
                "Thought records for two worry episodes.",
                "Continue cognitive restructuring; add worry postponement.",
            ),
            (
                5,
                13,
                "Completed three thought records; noticed 'fortune telling'.",
                ["CBT", "worry postponement"],
                "Denies SI/HI.",
                "Worry time 6:30 pm, 20 minutes.",
                "Review worry time; introduce relaxation.",
            ),
            (
                5,
                12,
                "Worry postponement helped on weekdays; weekend harder after call with her sister.",
                ["relaxation training", "CBT"],
                "No SI or HI.",
                "Progressive muscle relaxation nightly.",
                "Behavioral experiments on reassurance seeking.",
            ),
            (
                6,
                10,
                "Stopped checking email after 9 pm as an experiment; anxiety peaked then fell.",
                ["behavioral experiment", "CBT"],
                "Denies SI/HI.",
                "Two behavioral experiments this week.",
                "Continue experiments; assess mood symptoms for rule-out.",
            ),
            (
                6,
                9,
                "Mood brighter; sleeping 6.5 hours. Low mood criteria not met; MDD ruled out.",
                ["CBT", "relaxation training"],
                "Denies SI/HI.",
                "Keep worry time; PMR three times a week.",
                "Begin relapse prevention.",
            ),
            (
                7,
                7,
                "Handled a performance review with moderate anxiety; used coping statements.",
                ["CBT", "relapse prevention"],
                "Denies SI/HI.",
                "Write relapse prevention plan.",
                "Taper to biweekly sessions.",
            ),
            (
                7,
                6,
                "Reports feeling in control most days; occasional worry about father.",
                ["relapse prevention"],
                "Denies SI/HI.",
                "Follow relapse prevention plan.",
                "Booster session in one month.",
            ),
        ],
    },
    {
        "patient_id": "P02",
        "name": "Daniel Okafor (synthetic)",
        "birth_year": 1984,
        "start": "2026-01-08",
        "scale": "PHQ-9",
        "diagnoses": "Major depressive disorder, recurrent, moderate (F33.1). Alcohol use, monitor.",
        "sessions": [
            (
                3,
                19,
                "Low energy, withdrew from friends after layoff; drinking 4-5 beers nightly.",
                ["psychoeducation", "behavioral activation"],
                "Endorses passive SI without plan or intent; denies HI. Safety plan completed.",
                "Activity monitoring log.",
                "Weekly sessions; review safety plan.",
            ),
            (
                3,
                18,
                "Stayed in bed most mornings; drinking continues on weekdays.",
                ["behavioral activation", "safety planning"],
                "Reports passive SI twice this week, no plan; denies HI.",
                "Schedule one pleasant activity daily.",
                "Motivational interviewing about alcohol.",
            ),
            (
                4,
                16,
                "Walked with his brother twice; cut back to 2 beers on weeknights.",
                ["behavioral activation", "motivational interviewing"],
                "Denies SI today; denies HI.",
                "Three scheduled activities; drink log.",
                "Continue activation; explore values.",
            ),
            (
                4,
                15,
                "Applied for two jobs; felt rejected after no reply.",
                ["CBT", "behavioral activation"],
                "Denies SI/HI.",
                "Thought record on rejection.",
                "Cognitive restructuring on self-criticism.",
            ),
            (
                5,
                13,
                "Interview scheduled; reports more energy. Alcohol limited to weekends.",
                ["CBT", "behavioral activation"],
                "No SI. Denies HI.",
                "Prepare for interview with coping card.",
                "Continue CBT.",
            ),
            (
                6,
                11,
                "Interview went well; socializing with friends again.",
                ["behavioral activation", "values work"],
                "Denies SI/HI.",
                "Values-based activity each day.",
                "Assess progress; consider biweekly.",
            ),
            (
                6,
                9,
                "Started part-time job; sleep regular. No alcohol this week.",
                ["CBT"],
                "Denies SI/HI. No longer having thoughts of death.",
                "Keep activity schedule.",
                "Relapse prevention next session.",
            ),
            (
                7,
                7,
                "Mood stable; enjoys work. Occasional urge to drink when stressed, managed.",
                ["relapse prevention"],
                "Denies SI/HI. If suicidal thoughts return, he will call 988.",
                "Relapse prevention plan.",
                "Biweekly sessions.",
            ),
        ],
    },
    {
        "patient_id": "P03",
        "name": "Priya Shah (synthetic)",
        "birth_year": 1998,
        "start": "2026-01-12",
        "scale": "PCL-5",
        "diagnoses": "Post-traumatic stress disorder, chronic (F43.12), after a car accident in 2024.",
        "sessions": [
            (
                4,
                58,
                "Nightmares 4 nights a week; avoids driving. Her mother has depression and relies on her.",
                ["psychoeducation"],
                "Denies SI/HI. History of childhood physical abuse by stepfather, none since age 16.",
                "Read PTSD handout.",
                "Begin prolonged exposure.",
            ),
            (
                4,
                56,
                "Breathing retraining practiced; trauma narrative discussed.",
                ["prolonged exposure", "breathing retraining"],
                "Denies SI/HI.",
                "Breathing retraining twice daily.",
                "Build in vivo hierarchy.",
            ),
            (
                5,
                52,
                "In vivo hierarchy built: sitting in a parked car (SUDS 40) to highway driving (SUDS 95).",
                ["prolonged exposure", "in vivo exposure"],
                "Denies SI/HI.",
                "Sit in parked car daily.",
                "First imaginal exposure.",
            ),
            (
                3,
                55,
                "First imaginal exposure was hard; distress high afterwards and slept poorly.",
                ["prolonged exposure", "imaginal exposure"],
                "Denies SI. Denies HI.",
                "Listen to exposure recording daily.",
                "Continue imaginal exposure; normalize distress.",
            ),
            (
                4,
                48,
                "Distress lower on repeated recording; drove around the block with a friend.",
                ["imaginal exposure", "in vivo exposure"],
                "Denies SI/HI.",
                "Drive in neighborhood three times.",
                "Hot spots in narrative.",
            ),
            (
                5,
                42,
                "Nightmares down to once a week; drove to the grocery store alone.",
                ["in vivo exposure", "imaginal exposure"],
                "Denies SI/HI.",
                "Drive on a main road.",
                "Continue exposure; processing.",
            ),
            (
                6,
                36,
                "Drove on the highway for one exit; proud of herself.",
                ["in vivo exposure", "cognitive processing"],
                "Denies SI/HI.",
                "Highway for two exits.",
                "Processing of guilt beliefs.",
            ),
            (
                7,
                30,
                "Rarely avoids now; guilt about the accident lessened.",
                ["cognitive processing", "relapse prevention"],
                "Denies SI/HI.",
                "Continue driving practice.",
                "Biweekly; plan termination.",
            ),
        ],
    },
    {
        "patient_id": "P04",
        "name": "Marcus Bell (synthetic)",
        "birth_year": 2006,
        "start": "2026-01-14",
        "scale": "SPIN",
        "diagnoses": "Social anxiety disorder (F40.10). Cannabis use, rule out cannabis use disorder.",
        "sessions": [
            (
                5,
                44,
                "Avoids speaking in class; skips lunch in the cafeteria. Uses cannabis daily to calm down.",
                ["psychoeducation", "motivational interviewing"],
                "Denies SI/HI. Denies self-harm.",
                "List feared social situations.",
                "Build exposure hierarchy.",
            ),
            (
                5,
                43,
                "Hierarchy built; most feared is presenting in class.",
                ["exposure hierarchy", "CBT"],
                "Denies SI/HI.",
                "Ask a stranger for directions twice.",
                "Begin exposure.",
            ),
            (
                5,
                41,
                "Did one exposure; left early. Cannabis use continues most evenings.",
                ["exposure", "motivational interviewing"],
                "Denies SI/HI.",
                "Eat lunch in cafeteria twice.",
                "Continue exposure; cannabis reduction goal.",
            ),
            (
                6,
                37,
                "Ate in cafeteria three times; anxiety fell from 70 to 40.",
                ["exposure", "CBT"],
                "Denies SI/HI.",
                "Ask a question in class.",
                "Cognitive work on being judged.",
            ),
            (
                6,
                34,
                "Asked a question in class; cut cannabis to weekends.",
                ["exposure", "cognitive restructuring"],
                "Denies SI/HI.",
                "Two class questions; no cannabis on weekdays.",
                "Role-play presentation.",
            ),
            (
                6,
                31,
                "Role-played a presentation; safety behaviors reduced.",
                ["exposure", "role-play"],
                "Denies SI/HI.",
                "Drop safety behaviors (no notes held).",
                "Real presentation next week.",
            ),
            (
                7,
                27,
                "Gave the presentation; shaky but finished. No longer using cannabis.",
                ["exposure"],
                "Denies SI/HI. Denies substance use.",
                "Join one club meeting.",
                "Continue exposure.",
            ),
            (
                8,
                22,
                "Went to a club meeting and talked to two people.",
                ["exposure", "relapse prevention"],
                "Denies SI/HI.",
                "Maintain weekly social exposure.",
                "Biweekly sessions.",
            ),
        ],
    },
    {
        "patient_id": "P05",
        "name": "Elena Novak (synthetic)",
        "birth_year": 1974,
        "start": "2026-01-15",
        "scale": "ISI",
        "diagnoses": "Adjustment disorder with mixed anxiety and depressed mood (F43.23); insomnia.",
        "sessions": [
            (
                5,
                20,
                "Divorce finalized last month; lies awake until 3 am ruminating.",
                ["psychoeducation", "sleep hygiene"],
                "Denies SI/HI.",
                "Sleep diary.",
                "Start CBT for insomnia.",
            ),
            (
                5,
                19,
                "Sleep diary shows 5 hours sleep and long time in bed.",
                ["CBT-I", "stimulus control"],
                "Denies SI/HI.",
                "Fixed rise time 6:30 am; out of bed if awake 20 min.",
                "Sleep restriction.",
            ),
            (
                4,
                18,
                "Tired with sleep restriction; argued with ex-husband about the house.",
                ["CBT-I", "sleep restriction"],
                "Denies SI/HI. Her ex-husband has been drinking heavily.",
                "Keep sleep window 12:30-6:30.",
                "Add mindfulness for rumination.",
            ),
            (
                5,
                15,
                "Sleep efficiency up to 82%; still ruminating about the divorce.",
                ["mindfulness", "CBT-I"],
                "Denies SI/HI.",
                "Body scan nightly.",
                "Widen sleep window.",
            ),
            (
                5,
                14,
                "Sleep improved; mood flat, misses her old routines.",
                ["mindfulness", "behavioral activation"],
                "Denies SI/HI.",
                "One social activity.",
                "Activation and values.",
            ),
            (
                4,
                14,
                "Daughter moved out; lonely. Passing thought 'what's the point', no intent.",
                ["supportive therapy", "safety planning"],
                "Denies active SI, plan or intent. If SI emerges, she will call the crisis line.",
                "Call a friend twice.",
                "Monitor mood closely.",
            ),
            (
                5,
                12,
                "Joined a walking group; sleeps 6.5 hours.",
                ["behavioral activation", "mindfulness"],
                "Denies SI/HI.",
                "Walking group twice a week.",
                "Continue activation.",
            ),
            (
                5,
                11,
                "Mood about the same; better sleep but grieving the marriage.",
                ["supportive therapy", "grief work"],
                "Denies SI/HI.",
                "Letter to self about the marriage.",
                "Grief focus next sessions.",
            ),
        ],
    },
    {
        "patient_id": "P06",
        "name": "Jordan Lee (synthetic)",
        "birth_year": 2002,
        "start": "2026-01-19",
        "scale": "DERS",
        "diagnoses": "Borderline personality disorder (F60.3); rule out bipolar II disorder.",
        "sessions": [
            (
                3,
                130,
                "Intense anger after a breakup; cut forearm twice this week.",
                ["DBT", "chain analysis"],
                "Endorses self-harm (cutting) this week; denies SI and HI. Safety plan completed.",
                "Diary card daily.",
                "DBT skills: distress tolerance.",
            ),
            (
                4,
                126,
                "Used ice and paced breathing once; cut once.",
                ["DBT", "distress tolerance"],
                "Self-harm once this week (superficial cut); denies SI/HI.",
                "TIPP skills when urges over 70.",
                "Chain analysis of the cut.",
            ),
            (
                4,
                122,
                "No cutting; urges strong after a fight with roommate.",
                ["DBT", "chain analysis"],
                "Denies self-harm this week; urges present. Denies SI/HI.",
                "Diary card; opposite action.",
                "Emotion regulation module.",
            ),
            (
                5,
                118,
                "Slept 4 hours for three nights with racing ideas; productive and irritable.",
                ["DBT", "emotion regulation"],
                "Denies SI/HI. Denies self-harm.",
                "Sleep log; track energy.",
                "Assess hypomanic symptoms.",
            ),
            (
                3,
                121,
                "Crashed after the energetic week; hopeless after a fight with a friend.",
                ["DBT", "safety planning"],
                "Endorses passive SI (wishes to not wake up), no plan or intent. Denies HI. Denies self-harm.",
                "Safety plan on phone; call crisis line if SI worsens.",
                "Weekly plus phone coaching; psychiatric referral.",
            ),
            (
                4,
                117,
                "Saw psychiatrist; mood chart started. No self-harm.",
                ["DBT", "emotion regulation"],
                "Denies SI/HI. No self-harm since session 2.",
                "Mood chart daily.",
                "Interpersonal effectiveness.",
            ),
            (
                5,
                110,
                "Used DEAR MAN with roommate; less reactive.",
                ["DBT", "interpersonal effectiveness"],
                "Denies SI/HI. Denies self-harm.",
                "DEAR MAN twice.",
                "Continue skills.",
            ),
            (
                6,
                104,
                "Steadier week; uses skills without prompting.",
                ["DBT", "mindfulness"],
                "Denies SI/HI. No longer having urges to self-harm.",
                "Wise mind practice.",
                "Continue DBT; review bipolar rule-out with psychiatrist.",
            ),
        ],
    },
]

MSE = [
    "Appearance casually dressed, well groomed. Oriented x4. Speech normal rate and volume. Thought process linear and goal directed. Insight and judgment fair.",
    "Appearance appropriate. Alert and oriented. Affect congruent with mood. Thought content without delusions. Insight good, judgment good.",
    "Appearance tired. Oriented x4. Affect constricted. Thought process logical. Insight fair, judgment fair.",
]


def note(patient: dict[str, object], number: int, session: tuple[object, ...], day: date) -> str:
    mood, scale_score, subjective, interventions, risk, homework, plan = session
    scale = patient["scale"]
    return "\n".join(
        [
            f"Session {number}, {day.isoformat()}, 50-minute individual psychotherapy, in person.",
            f"Subjective: {subjective}",
            f"Mood: client rates mood {mood}/10. {scale} score: {scale_score}.",
            f"Risk: {risk}",
            f"Mental status: {MSE[number % len(MSE)]}",
            f"Interventions: {', '.join(interventions)}.",  # type: ignore[arg-type]
            f"Assessment: {patient['diagnoses']}",
            f"Homework: {homework}",
            f"Plan: {plan} Next session in one week.",
        ]
    )


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    patients, sessions = [], []
    for patient in PATIENTS:
        start = date.fromisoformat(str(patient["start"]))
        patients.append({k: patient[k] for k in ("patient_id", "name", "birth_year")})
        for index, session in enumerate(patient["sessions"]):  # type: ignore[arg-type]
            day = start + timedelta(days=7 * index)
            sessions.append(
                {
                    "session_id": f"{patient['patient_id']}-S{index + 1}",
                    "patient_id": patient["patient_id"],
                    "session_date": day.isoformat(),
                    "note": note(patient, index + 1, session, day),
                }
            )
    (OUT / "patients.json").write_text(json.dumps(patients, indent=1) + "\n", encoding="utf-8")
    with (OUT / "sessions.jsonl").open("w", encoding="utf-8") as out:
        for row in sessions:
            out.write(json.dumps(row) + "\n")
    print(f"{len(patients)} patients, {len(sessions)} sessions -> {OUT}")


if __name__ == "__main__":
    main()
