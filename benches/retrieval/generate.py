"""Deterministic conversational-memory set with gold evidence (``convmem``).

A seeded generator, no network, no model: eight personas each talk to an
assistant over twenty sessions spread across ten weeks. Sessions mix chit-chat,
near-miss distractors (turns that share a question's words but not its answer,
or tell the same kind of fact about someone else) and personal facts; most fact
turns bury the fact among one or two other sentences, as people write. Some facts
stay put (a pet's name, an allergy), some change over time (job, city, car,
hobby, diet, laptop: the later turn supersedes the earlier one), one kind
accumulates (trips). Questions are phrased the way a user asks weeks later,
with synonyms and paraphrases of the fact turn rather than its words; gold
evidence is the turn (or turns) that state the answer.

Question kinds:
  single    a fact stated once; gold = that turn
  current   a fact that changed; asks for the present value; gold = latest turn
  previous  a fact that changed; asks for the earlier value; gold = earlier turn
  multi     an accumulating or changed fact asked as a whole; gold = all turns

Each (fact, kind) gets up to two questions: style "paraphrase" shares no
content word with the fact turn (synonyms, other phrasing), style "overlap"
shares at least one content word with the fact sentence (the way a user
half-remembers their own words; checked when the question is chosen). Both kinds
of question are real: the first is where a lexical index cannot help, the
second where a small embedding model is easily distracted by near-misses.

Usage: python generate.py [OUT.json] [--seed N]. The output is a JSON object:
{"name", "seed", "personas": [{"name", "turns": [{"id", "session", "ts",
"speaker", "text"}]}], "questions": [{"id", "persona", "kind", "style", "topic", "text",
"gold": [turn ids]}]}. Same seed, same bytes (Python's random.Random is stable
across versions for the calls used here).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import re
import sys
from typing import Any

SEED = 15
SESSIONS = 20
START = dt.datetime(2026, 1, 5, 18, 0, tzinfo=dt.timezone.utc)

PERSONAS = ["maya", "oliver", "sofia", "dev", "hana", "lucas", "grace", "theo"]
NAMES = ["Priya", "Marcus", "Elena", "Tomás", "Hannah", "Kenji", "Aisha", "Louis", "Nadia",
         "Felix", "Rosa", "Ibrahim", "Claire", "Mateo", "Yuki", "Owen"]
CITIES = ["Lisbon", "Denver", "Rotterdam", "Minneapolis", "Kraków", "Austin", "Leeds",
          "Halifax", "Porto", "Kyoto", "Reykjavik", "Marrakesh", "Edinburgh", "Vancouver",
          "Seville", "Tallinn", "Oaxaca", "Bruges"]

# Each topic: values; say = the user's fact turn; ask = questions (by kind);
# reply = the assistant's answer to the fact turn (never repeats the value);
# near = distractor turns that share the topic's vocabulary but not the answer
# ({n} = someone else's name, {c} = a city, {x} = another value of the topic).
# "change" topics have a second statement (say2) that supersedes the first.
TOPICS: dict[str, dict[str, Any]] = {
    "pet": dict(
        values=["Biscuit", "Pepper", "Mochi", "Juniper", "Waffles", "Ziggy", "Noodle", "Clementine"],
        say=["We finally brought home a rescue greyhound last weekend, and the kids named her {v}.",
             "Big news: a scruffy little terrier lives with us now, he answers to {v}.",
             "I adopted a tabby kitten from the shelter on Saturday, I'm calling her {v}."],
        ask={"single": ["What's the name of my new pet?",
                        "Remind me what the animal we adopted is called?",
                        "What did we name the dog or cat that joined the family?"]},
        ask_o={'single': ['What name did we give the rescue we brought home?', 'What is the kitten or terrier called that we adopted from the shelter?']},
        reply=["Oh, how lovely! How is the little one settling in?",
               "That's wonderful news, give them a scratch behind the ears from me."],
        near=["My neighbour's dog barked all night again, I barely slept.",
              "{n} keeps sending me videos of her cat, it's adorable.",
              "There's a new pet supply store opening near the station."]),
    "job": dict(
        change=True,
        values=["nurse at St. Anne's hospital", "data analyst at Brightline", "chemistry teacher at Westfield High",
                "sous-chef at a tapas bar", "UX designer at Fernwood", "paralegal at Hale & Moss",
                "logistics coordinator at Portside", "bike mechanic at Spokes"],
        say=["I signed the offer today, I start next month as a {v}.",
             "First week done as a {v}, my feet hurt but I love it."],
        say2=["Quick update: I handed in my notice, I'm now working as a {v}.",
              "I switched careers after all, these days I'm a {v}."],
        ask={"current": ["What do I do for a living these days?", "Where am I employed at the moment?"],
             "previous": ["What was my old position before I changed careers?",
                          "Which job did I have before the switch?"]},
        ask_o={'current': ['What am I working as now since I handed in my notice?', 'Which career did I switch to?'], 'previous': ['What did I start as when I signed that first offer?']},
        reply=["Congratulations! How are your new colleagues?", "That's a big step, I'm proud of you."],
        near=["Work was exhausting this week, so many meetings.",
              "{n} hates her job and keeps complaining about her boss.",
              "I updated my CV just in case, you never know."]),
    "city": dict(
        change=True,
        values=["Lisbon", "Denver", "Rotterdam", "Minneapolis", "Kraków", "Austin", "Leeds", "Halifax"],
        say=["The apartment hunt is over, we're settling in {v} for good.",
             "We signed a lease in {v}, the flat has a tiny balcony."],
        say2=["The movers came yesterday, we have officially relocated to {v}.",
              "New address! We packed everything up and moved to {v}."],
        ask={"current": ["Which town am I living in right now?", "Where is my home these days?"],
             "previous": ["Where did I live before we moved?", "Which place was home before the relocation?"],
             "multi": ["Which cities have I lived in?"]},
        ask_o={'current': ['Where did we move to with the movers?'], 'previous': ['Where did we sign the lease on the flat with the balcony?']},
        reply=["Exciting! What's the neighbourhood like?", "Moving is so much work, I hope you can rest now."],
        near=["{n} is thinking about moving to {c} next year.",
              "Rent prices are going up everywhere, it's crazy.",
              "I walked around the old town of {c} on a work trip once."]),
    "allergy": dict(
        values=["peanuts", "shellfish", "penicillin", "bee stings", "kiwi fruit", "sesame", "latex", "strawberries"],
        say=["Turns out I react badly to {v}, the doctor confirmed it with a skin test.",
             "Note to self: {v} make my throat swell up, I had to use the EpiPen."],
        ask={"single": ["What am I allergic to?", "Is there anything that gives me an allergic reaction?",
                        "What should I avoid because of my allergy?"]},
        ask_o={'single': ['What did the skin test confirm I react badly to?', 'What made my throat swell up?']},
        reply=["That sounds scary, I'm glad you found out.", "Good to know, I'll keep that in mind."],
        near=["Pollen season is brutal this year, my eyes are itchy.",
              "{n} is allergic to cats, so she never visits."]),
    "car": dict(
        change=True,
        values=["a red Mazda 3", "an old Volvo estate", "a Toyota Prius", "a Honda Civic", "a Subaru Outback",
                "a white Tesla Model 3", "a VW Golf", "a Ford Ranger"],
        say=["We traded in the minivan and drove home {v}.", "I bought {v} from a guy on Craigslist, runs great."],
        say2=["Sold the old one, now I'm driving {v}.", "Got rid of my previous ride and picked up {v}."],
        ask={"current": ["What vehicle do I own now?", "Which automobile am I currently driving?"],
             "previous": ["What car did I have before?"]},
        ask_o={'current': ['What am I driving since I sold the old one?'], 'previous': ['What did we drive home after trading in the minivan?']},
        reply=["Nice! Road trip soon?", "Congrats on the new wheels."],
        near=["Traffic on the ring road was a nightmare this morning.",
              "{n} got a parking ticket outside our building.",
              "The garage says the tyres need replacing soon."]),
    "partner": dict(
        values=NAMES[:8],
        say=["{v} and I just celebrated five years together, we went back to where we had our first date.",
             "{v} surprised me with dinner tonight, I really got lucky with that one."],
        ask={"single": ["Who is my significant other?", "What's my boyfriend or girlfriend called?",
                        "What's the name of the person I'm in a relationship with?"]},
        ask_o={'single': ['Who did I celebrate five years together with?', 'Who surprised me with dinner?']},
        reply=["Aww, that's so sweet!", "Five years, that's a real milestone."],
        near=["{n} and her husband are getting divorced, it's sad.",
              "Valentine's Day is so commercial, honestly."]),
    "hobby": dict(
        change=True,
        values=["pottery", "bouldering", "the cello", "sourdough baking", "trail running", "birdwatching",
                "chess", "woodworking"],
        say=["I've gotten really into {v} lately, I do it every Sunday morning.",
             "Signed up for a beginners' class in {v}, first session was so fun."],
        say2=["I kind of dropped my old weekend thing, these days it's all about {v}.",
              "New obsession: {v}. I spend every free evening on it."],
        ask={"current": ["What's my current pastime?", "What do I do for fun in my spare time now?"],
             "previous": ["Which leisure activity did I use to do on weekends?"]},
        ask_o={'current': ['What is my new obsession these days?'], 'previous': ['What did I get into every Sunday morning?']},
        reply=["That sounds like a great way to unwind.", "You'll have to show me what you've made!"],
        near=["I never have any free time anymore.",
              "{n} tried to get me into {x} but it's not for me."]),
    "trips": dict(
        multi=True,
        values=["Porto", "Kyoto", "Reykjavik", "Marrakesh", "Edinburgh", "Vancouver", "Seville", "Tallinn",
                "Oaxaca", "Bruges"],
        say=["Just got back from four days in {v}, the food was incredible.",
             "Our long weekend in {v} was exactly the break I needed.",
             "Spent the week in {v}, we walked twenty kilometres a day."],
        ask={"multi": ["Where have I been on holiday recently?", "Which places did I travel to?"]},
        ask_o={'multi': ['Which places did I spend a long weekend or a week in?']},
        reply=["Welcome back! Any photos?", "Sounds amazing, I'm a little jealous."],
        near=["{n} keeps posting beach pictures from {c}.",
              "I really need a vacation, I'm so burnt out."]),
    "birthday": dict(
        values=["March 3", "July 19", "October 28", "January 11", "May 6", "August 22", "December 2", "June 30"],
        say=["My birthday is {v}, and this year I'm turning forty.",
             "Heads up, {v} is my big day, I'm planning a small party."],
        ask={"single": ["When was I born?", "What date do I celebrate getting a year older?"]},
        ask_o={'single': ['When is my birthday party?', 'What is the date of my birthday?']},
        reply=["I'll make a note! Any plans?", "Forty is a great age."],
        near=["It's {n}'s birthday tomorrow and I haven't got a gift yet.",
              "I hate parties where I don't know anyone."]),
    "diet": dict(
        change=True,
        values=["vegetarian", "vegan", "pescatarian", "keto", "gluten-free", "dairy-free"],
        say=["After that documentary I decided to eat {v} from now on.",
             "I've been {v} for three weeks and I feel great."],
        say2=["I gave up on the old way of eating, I'm trying {v} instead.",
              "Switching it up again: I'm {v} now, doctor's suggestion."],
        ask={"current": ["What kind of eating plan am I following?", "What food restrictions do I have now?"],
             "previous": ["What diet was I on earlier?"]},
        ask_o={'current': ['What am I eating now after I switched again?'], 'previous': ['How did I decide to eat after the documentary?']},
        reply=["How are you finding it so far?", "That takes discipline, well done."],
        near=["{n} cooked a huge lasagne for the whole office.",
              "I had way too much chocolate this weekend."]),
    "medication": dict(
        values=["lisinopril", "amlodipine", "losartan", "metoprolol"],
        say=["The doctor put me on {v} for my blood pressure, one tablet every morning.",
             "Picked up my {v} prescription, hopefully my blood pressure comes down."],
        ask={"single": ["Which pill was I prescribed for hypertension?", "What medicine do I take daily?"]},
        ask_o={'single': ['What tablet do I take for blood pressure?', 'Which prescription did I pick up?']},
        reply=["I hope it helps. Any side effects?", "Good that you're getting it checked."],
        near=["{n} is in hospital for a minor operation.",
              "I should really book a dentist appointment."]),
    "child": dict(
        values=["Lily", "Noah", "Ava", "Leo", "Mia", "Arlo", "Zoe", "Eli"],
        say=["Our youngest, {v}, starts kindergarten at Maple Grove in September.",
             "{v} lost a first tooth today and is so proud."],
        ask={"single": ["What's my little one's name?", "Which of my kids is beginning school this autumn?"]},
        ask_o={'single': ['Which of my kids starts kindergarten?', 'Who lost a first tooth?']},
        reply=["What a milestone!", "They grow up so fast."],
        near=["{n}'s son got into a fight at school.",
              "The school run this morning was chaos."]),
    "team": dict(
        values=["Celtics", "Arsenal", "Packers", "Ajax", "Yankees", "Maple Leafs", "Boca Juniors", "Bayern"],
        say=["I'm a die-hard {v} fan, I have never missed a home game.",
             "The {v} lost again tonight, I'm heartbroken."],
        ask={"single": ["Which club do I support?", "Who do I cheer for in sports?"]},
        ask_o={'single': ['Which team am I a fan of?', 'Who lost the game that left me heartbroken?']},
        reply=["There's always next season!", "Loyal to the end, I respect it."],
        near=["{n} dragged me to a match but I don't get the offside rule.",
              "The stadium downtown is getting renovated."]),
    "teacher": dict(
        values=NAMES[8:],
        say=["Cello lessons moved to Thursday evenings with a new instructor, {v}.",
             "My piano tutor {v} says I'm ready for the recital."],
        ask={"single": ["Who gives me music lessons?", "What's my music teacher's name?"]},
        ask_o={'single': ['Who is my cello or piano instructor?', 'Who says I am ready for the recital?']},
        reply=["Sounds like you're making progress!", "Thursday evenings are a good slot."],
        near=["The choir concert was lovely, {n} sang a solo.",
              "I listened to a great jazz album on the train."]),
    "book": dict(
        values=["Middlemarch", "The Overstory", "Piranesi", "Dune", "Circe", "Educated", "The Road", "Station Eleven"],
        say=["I'm halfway through {v} and can't put it down.", "Finally finished {v}, what an ending."],
        ask={"single": ["What novel have I been reading?", "Which book was I absorbed in?"]},
        ask_o={'single': ['Which book did I finish?', 'What am I halfway through reading?']},
        reply=["Ooh, no spoilers please!", "I've heard great things about it."],
        near=["{n} lent me a pile of magazines.",
              "The library fines are ridiculous these days."]),
    "restaurant": dict(
        values=["Tanuki", "Menya Kou", "Slurp House", "Ichiban", "Nami", "Umami Bar", "Kagura", "Hoshi"],
        say=["We found an amazing little ramen place called {v} two blocks from our flat.",
             "Dinner at {v} again, their tonkotsu broth is unreal."],
        ask={"single": ["What was that noodle shop near my apartment?", "Where do we go for Japanese soup?"]},
        ask_o={'single': ['What is the ramen place called?', 'Where do we get tonkotsu broth?']},
        reply=["Yum, I'm hungry now.", "A good local spot is priceless."],
        near=["{n} recommended a pizza place but it was closed.",
              "I burned the rice tonight, cooking is hard."]),
    "laptop": dict(
        change=True,
        values=["a ThinkPad X1", "a MacBook Air", "a Dell XPS 13", "a Framework 13", "a Surface Laptop",
                "an ASUS Zenbook"],
        say=["My old machine died so I bought {v}.", "Work issued me {v}, the keyboard is great."],
        say2=["Returned it and got {v} instead, much better battery.", "Upgraded again: {v}, finally fast enough."],
        ask={"current": ["Which computer am I using now?", "What notebook do I work on at the moment?"],
             "previous": ["What computer did I have before the upgrade?"]},
        ask_o={'current': ['Which laptop did I upgrade to?'], 'previous': ['What machine did I buy when my old one died?']},
        reply=["Nice upgrade!", "Did you manage to move all your files?"],
        near=["The wifi at the café kept dropping.",
              "{n} spilled coffee on her keyboard."]),
    "race": dict(
        values=["Berlin half marathon", "city 10K", "Tough Mudder", "100-mile charity bike ride", "Ironman 70.3",
                "Boston marathon"],
        say=["I signed up for the {v} in the spring, training starts now.",
             "Six weeks until the {v}, my legs are sore every day."],
        ask={"single": ["What event am I getting in shape for?", "What competition am I preparing for?"]},
        ask_o={'single': ['What am I training for in the spring?', 'Which race did I sign up for?']},
        reply=["You've got this!", "Make sure you rest too."],
        near=["{n} ran past our house at 6am, who does that.",
              "I bought new running shoes but they pinch."]),
    "sibling": dict(
        values=NAMES[4:12],
        say=["My brother {v} is staying with us for a few weeks while he finds a place.",
             "My sister {v} is crashing on our sofa until her lease starts."],
        ask={"single": ["Which family member is living at my house for now?", "Who is my houseguest?"]},
        ask_o={'single': ['Which brother or sister is staying with us?', 'Who is crashing on our sofa?']},
        reply=["That's kind of you.", "Hope the sofa is comfortable!"],
        near=["{n} from work invited me to her family reunion.",
              "Our guest room is full of boxes."]),
    "phobia": dict(
        values=["heights", "deep water", "spiders", "flying", "public speaking", "needles"],
        say=["I'm honestly terrified of {v}, always have been.", "My therapist is helping me with my fear of {v}."],
        ask={"single": ["What am I scared of?", "What frightens me?"]},
        ask_o={'single': ['What is my fear?', 'What is my therapist helping me with?']},
        reply=["That's really common, you're not alone.", "Good on you for working on it."],
        near=["{n} watched a horror film and couldn't sleep.",
              "Thunderstorms make the dog nervous."]),
    "language": dict(
        values=["Portuguese", "Japanese", "Dutch", "Korean", "Italian", "Polish"],
        say=["I started Duolingo for {v} because we might move abroad.",
             "My {v} tutor says my pronunciation is improving."],
        ask={"single": ["Which foreign tongue am I studying?", "What language am I learning?"]},
        ask_o={'single': ['Which language did I start on Duolingo?', 'What does my tutor say my pronunciation is improving in?']},
        reply=["Boa sorte! Or whatever the right phrase is.", "Consistency is key, keep it up."],
        near=["{n} speaks five languages, it's humbling.",
              "Subtitles on every film, I can't hear the dialogue."]),
    "garden": dict(
        values=["cherry tomatoes", "basil and mint", "chili peppers", "strawberries", "sunflowers", "lavender"],
        say=["I planted {v} on the balcony this spring.", "The {v} in my window boxes are finally sprouting."],
        ask={"single": ["What's growing in my outdoor pots?", "What did I sow in my container garden?"]},
        ask_o={'single': ['What did I plant on the balcony?', 'What is sprouting in my window boxes?']},
        reply=["Green fingers!", "Don't forget to water them in the heat."],
        near=["{n}'s garden is huge, she grows everything.",
              "The park near us has lovely flowers right now."]),
    "wedding": dict(
        values=NAMES[:8],
        say=["{v}'s wedding is on the 14th and I'm giving the toast.",
             "Still writing my best-man speech for {v}'s big day."],
        ask={"single": ["Whose marriage ceremony am I speaking at?", "Who is getting married that I'm toasting?"]},
        ask_o={'single': ['Whose wedding am I giving the toast at?', 'Who is my best-man speech for?']},
        reply=["You'll be great, keep it short and sweet.", "Weddings are so much fun."],
        near=["Wedding season means I'm broke.",
              "{n} caught the bouquet last summer."]),
    "coffee": dict(
        values=["an oat flat white", "a double espresso", "a cortado", "a chai latte", "a cold brew with milk"],
        say=["My usual order is {v}, extra hot.", "Barista already knows me, {v} every single morning."],
        ask={"single": ["How do I take my coffee?", "What's my regular café drink?"]},
        ask_o={'single': ['What is my usual order at the barista?', 'What do I drink every morning?']},
        reply=["Classic choice.", "A morning ritual is important."],
        near=["{n} drinks tea with four sugars, disgusting.",
              "The office coffee machine is broken again."]),
    "injury": dict(
        values=["left ankle", "right knee", "wrist", "shoulder", "lower back"],
        say=["I twisted my {v} playing five-a-side and I'm on crutches.", "Physio says my {v} needs six weeks."],
        ask={"single": ["What did I hurt during football?", "Which body part did I injure?"]},
        ask_o={'single': ['What did I twist playing five-a-side?', 'What does the physio say needs six weeks?']},
        reply=["Ouch! Rest up.", "Take it easy and do your exercises."],
        near=["{n} broke her arm skiing in {c}.",
              "My back aches from sitting all day."]),
    "show": dict(
        values=["Severance", "The Bear", "Slow Horses", "Shogun", "Fleabag", "Succession"],
        say=["We binged all of {v} over the weekend.", "Just started {v}, the first episode was wild."],
        ask={"single": ["What series did I watch recently?", "Which TV programme was I hooked on?"]},
        ask_o={'single': ['What did we binge over the weekend?', 'Which show did I just start?']},
        reply=["Isn't it good?", "I've heard the second season is even better."],
        near=["{n} keeps recommending documentaries.",
              "Our streaming subscription went up again."]),
    "volunteer": dict(
        values=["food bank on Elm Street", "animal shelter", "community garden", "library's reading hour"],
        say=["Every other Saturday I help out at the {v}.", "Did another shift at the {v}, it's so rewarding."],
        ask={"single": ["Where do I volunteer?", "What charity work do I do?"]},
        ask_o={'single': ['Where do I help out every other Saturday?', 'Where did I do another shift?']},
        reply=["That's lovely of you.", "Giving back feels good, doesn't it."],
        near=["{n} organised a bake sale for the school.",
              "I donated old clothes to the charity shop."]),
    "savings": dict(
        values=["a house deposit", "a trip to Japan", "a new kitchen", "our wedding", "a sabbatical"],
        say=["We're saving up for {v}, putting aside 300 a month.", "Opened a separate account just for {v}."],
        ask={"single": ["What am I setting money aside for?", "What's my savings goal?"]},
        ask_o={'single': ['What are we saving up for?', 'What did I open a separate account for?']},
        reply=["Smart planning!", "Every little bit adds up."],
        near=["Groceries cost a fortune this month.",
              "{n} won a small prize in the lottery."]),
}

CHITCHAT_USER = [
    "Hey, it's me again.", "Morning! Quick one today.", "Long day, just want to chat a bit.",
    "The weather has been so grey all week.", "I finally cleaned out the fridge.",
    "Did you know octopuses have three hearts?", "I can't decide what to cook tonight.",
    "My phone battery barely lasts a day now.", "I watched the sunset from the roof, it was gorgeous.",
    "Can you remind me to call the plumber tomorrow?", "I keep forgetting to drink water.",
    "What's a good stretch for a stiff neck?", "The train was delayed forty minutes again.",
    "I started journaling before bed.", "I think I need new glasses.",
    "It snowed a little this morning.", "I'm trying to wake up earlier.", "Ugh, Mondays.",
    "I reorganised my bookshelf by colour.", "The neighbours are renovating, so much drilling.",
    "I found a twenty in an old jacket.", "Any tips for falling asleep faster?",
    "My plant collection is getting out of hand.", "We had friends over for board games.",
    "I'm so tired of answering emails.", "Just checking in before the weekend.",
    "I tried a new podcast about history.", "Lunch was a sad desk salad today.",
]
CHITCHAT_ASSISTANT = [
    "Good to hear from you!", "I'm here, what's on your mind?", "That sounds like a lot, take a breath.",
    "Ha, that's a fun fact.", "Maybe something simple, like pasta with whatever's in the fridge?",
    "Noted, I'll bring it up tomorrow.", "Try a few slow neck rolls and a warm shower.",
    "Sorry about the delay, that's frustrating.", "Journaling is a great habit.",
    "An eye test is probably a good idea.", "Small wins count!", "Hang in there.",
    "No screens for an hour before bed can help.", "That sounds cosy.", "Enjoy your weekend!",
    "Which episode did you like best?", "A sunny day will come, I promise.", "Tell me more.",
]


_FUNCTION_WORDS = set(
    "a about after again all am an and any are as at be been before but by can did do does done for from "
    "get got had has have he her him his how i i'm if in into is it its me my now of on one or our over she "
    "since so that the their them then there these they this to up us was we were what when where which who "
    "whose why will with would you your".split()
)


def _words(text: str) -> set[str]:
    """Content words, crudely stemmed (first five letters), for the overlap check only."""
    return {w[:5] for w in re.findall(r"[a-z']+", text.lower()) if w not in _FUNCTION_WORDS and len(w) > 2}


def _shares_word(question: str, facts: list[str]) -> bool:
    q = _words(question)
    return any(q & _words(f) for f in facts)


def generate(seed: int = SEED) -> dict[str, Any]:
    rng = random.Random(seed)
    personas = []
    questions = []
    qn = 0
    for pname in PERSONAS:
        turns: list[dict[str, Any]] = []
        # Which topics this persona talks about, and in which sessions.
        topics = sorted(TOPICS)
        rng.shuffle(topics)
        chosen = sorted(topics[:22])
        # plan[session] = list of (topic, value, which, qkey); qkey groups gold turns.
        plan: list[list[tuple[str, str, str]]] = [[] for _ in range(SESSIONS)]
        facts: dict[str, list[tuple[int, str, str]]] = {}
        for t in chosen:
            spec = TOPICS[t]
            vals = list(spec["values"])
            rng.shuffle(vals)
            if spec.get("change"):
                s1 = rng.randrange(0, SESSIONS - 8)
                s2 = rng.randrange(s1 + 4, SESSIONS)
                facts[t] = [(s1, vals[0], "say"), (s2, vals[1], "say2")]
            elif spec.get("multi"):
                ss = sorted(rng.sample(range(SESSIONS), 3))
                facts[t] = [(s, vals[i], "say") for i, s in enumerate(ss)]
            else:
                facts[t] = [(rng.randrange(SESSIONS), vals[0], "say")]
            for s, v, which in facts[t]:
                plan[s].append((t, v, which))
        fact_turn: dict[tuple[str, str], str] = {}
        fact_text: dict[Any, str] = {}
        for s in range(SESSIONS):
            day = START + dt.timedelta(days=s * 3 + rng.randrange(3), minutes=rng.randrange(180))
            user_lines: list[tuple[str, str | None, str | None, str | None]] = []
            user_lines.append((rng.choice(CHITCHAT_USER[:3]), None, None, None))
            for t, v, which in plan[s]:
                line = fact = rng.choice(TOPICS[t][which]).format(v=v)
                # Most people bury the news in a longer message.
                if rng.random() < 0.6:
                    line = rng.choice(CHITCHAT_USER[3:]) + " " + line
                if rng.random() < 0.5:
                    line = line + " " + rng.choice(CHITCHAT_USER[3:])
                fact_text[(t, v)] = fact
                user_lines.append((line, t, v, rng.choice(TOPICS[t]["reply"])))
            n_fill = rng.randrange(7, 11) - len(plan[s])
            for _ in range(max(n_fill, 3)):
                if rng.random() < 0.5:
                    t = rng.choice(sorted(TOPICS))
                    spec = TOPICS[t]
                    line = rng.choice(spec["near"]).format(
                        n=rng.choice(NAMES), c=rng.choice(CITIES), x=rng.choice(spec["values"]))
                else:
                    line = rng.choice(CHITCHAT_USER[3:])
                if rng.random() < 0.4:
                    line = line + " " + rng.choice(CHITCHAT_USER[3:])
                user_lines.append((line, None, None, None))
            head, rest = user_lines[0], user_lines[1:]
            rng.shuffle(rest)
            for k, (line, t, v, reply) in enumerate([head] + rest):
                ts = day + dt.timedelta(minutes=2 * k)
                tid = f"{pname}-s{s:02d}-t{2 * k:02d}"
                turns.append(dict(id=tid, session=s, ts=ts.isoformat(), speaker=pname, text=line))
                if t is not None:
                    fact_turn[(t, v)] = tid
                turns.append(dict(id=f"{pname}-s{s:02d}-t{2 * k + 1:02d}", session=s,
                                  ts=(ts + dt.timedelta(minutes=1)).isoformat(), speaker="assistant",
                                  text=reply or rng.choice(CHITCHAT_ASSISTANT)))
        personas.append(dict(name=pname, turns=turns))

        def ask(t: str, kind: str, gold: list[str]) -> None:
            nonlocal qn
            # One question in other words than the fact turn (style "paraphrase"),
            # one that shares some of its words (style "overlap").
            for style, key in (("paraphrase", "ask"), ("overlap", "ask_o")):
                pool = TOPICS[t][key].get(kind, [])
                if style == "overlap":
                    # Only the questions that share a word with the gold turns' fact sentence.
                    pool = [x for x in pool if _shares_word(x, [fact_text[g] for g in gold])]
                if pool:
                    qn += 1
                    questions.append(dict(id=f"q{qn:04d}", persona=pname, kind=kind, style=style, topic=t,
                                          text=rng.choice(pool), gold=gold))

        for t in chosen:
            spec = TOPICS[t]
            ids = [fact_turn[(t, v)] for _, v, _ in facts[t]]
            for _, v, _ in facts[t]:
                fact_text[fact_turn[(t, v)]] = fact_text[(t, v)]
            if spec.get("change"):
                ask(t, "current", [ids[-1]])
                ask(t, "previous", [ids[0]])
                ask(t, "multi", ids)
            else:
                ask(t, "multi" if spec.get("multi") else "single", ids)
    return dict(name="convmem", seed=seed, personas=personas, questions=questions)


def main(argv: list[str]) -> None:
    seed = SEED
    if "--seed" in argv:
        i = argv.index("--seed")
        seed = int(argv[i + 1])
        del argv[i : i + 2]
    data = generate(seed)
    text = json.dumps(data, ensure_ascii=False, indent=None, separators=(",", ":"))
    nturns = sum(len(p["turns"]) for p in data["personas"])
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    if argv:
        with open(argv[0], "w", encoding="utf-8") as f:
            f.write(text)
    print(f"convmem seed {seed}: {len(data['personas'])} personas, {nturns} turns, "
          f"{len(data['questions'])} questions, sha256 {digest}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
